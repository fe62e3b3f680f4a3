//! Extension images as scripts/image.sh makes them (`make image`), read and unpacked with the
//! tools a registry client uses: skopeo reads the OCI layout's index, manifest and config, and
//! umoci unpacks its layer the way the kubelet mounts an image volume, file for file.

use super::*;

/// An OCI image layout directory and the tag of its one image.
pub struct Image {
    layout: PathBuf,
    tag: String,
}

impl Image {
    /// The image of the package `deb`, made by scripts/image.sh into target/image-tests/ (a
    /// directory of the user running the tests: scripts/image.sh writes none that another user
    /// could swap, and the scratch directories are `postgres`'s).
    pub fn of_package(deb: &Path, name: &str) -> Image {
        let dir = root_dir().join(format!("target/image-tests/{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let layout = dir.canonicalize().unwrap().join("oci");
        let out = check(
            Command::new(root_dir().join("scripts/image.sh"))
                .arg(deb)
                .arg(&layout)
                .output()
                .unwrap(),
            "scripts/image.sh",
        );
        let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let tag = printed.rsplit(':').next().unwrap().to_string();
        assert_eq!(
            printed,
            format!("oci:{}:{tag}", layout.display()),
            "what scripts/image.sh printed"
        );
        Image { layout, tag }
    }

    pub fn layout(&self) -> &Path {
        &self.layout
    }

    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The reference skopeo and umoci take: `<layout>:<tag>`.
    pub fn reference(&self) -> String {
        format!("{}:{}", self.layout.display(), self.tag)
    }

    /// `skopeo inspect` of the image: its digest, layers, architecture, os and labels.
    pub fn inspect(&self) -> serde_json::Value {
        self.skopeo(&["inspect"])
    }

    /// The layout's index.json: the descriptor of the tagged manifest.
    pub fn index(&self) -> serde_json::Value {
        serde_json::from_slice(&fs::read(self.layout.join("index.json")).unwrap()).unwrap()
    }

    /// The image's manifest as stored (`skopeo inspect --raw`).
    pub fn manifest(&self) -> serde_json::Value {
        self.skopeo(&["inspect", "--raw"])
    }

    fn skopeo(&self, args: &[&str]) -> serde_json::Value {
        let out = check(
            Command::new("skopeo")
                .args(args)
                .arg(format!("oci:{}", self.reference()))
                .output()
                .unwrap(),
            "skopeo inspect",
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The bytes of the layout's blobs, the image's size in a registry.
    pub fn size(&self) -> u64 {
        let mut total = 0;
        for blob in fs::read_dir(self.layout.join("blobs/sha256")).unwrap() {
            total += blob.unwrap().metadata().unwrap().len();
        }
        total
    }

    /// Every entry of the image's layers as `tar -tv --numeric-owner` lists it: its mode
    /// (`-rw-r--r--`), owner (`0/0`) and path (directories end in `/`), sorted by path.
    pub fn entries(&self) -> Vec<(String, String, String)> {
        let mut entries = vec![];
        for layer in self.manifest()["layers"].as_array().unwrap() {
            let digest = layer["digest"].as_str().unwrap();
            let blob = self.layout.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
            let out = check(
                Command::new("tar")
                    .args(["-tvzf"])
                    .arg(&blob)
                    .arg("--numeric-owner")
                    .output()
                    .unwrap(),
                "tar -tv",
            );
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (mode, owner, path) = (fields[0], fields[1], fields[fields.len() - 1]);
                entries.push((mode.to_string(), owner.to_string(), path.to_string()));
            }
        }
        entries.sort_by(|a, b| a.2.cmp(&b.2));
        entries
    }

    /// The image's files in `dir` (made anew), as an image volume shows them: its root is `dir`.
    pub fn unpack_into(&self, dir: &Path) {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir.parent().unwrap()).unwrap();
        check(
            Command::new("umoci")
                .args(["raw", "unpack"])
                .args(if running_as_root() { None } else { Some("--rootless") })
                .arg("--image")
                .arg(self.reference())
                .arg(dir)
                .output()
                .unwrap(),
            "umoci raw unpack",
        );
    }
}
