#!/usr/bin/env bash
# Installs the clients that tests/docs/clients.rs runs the programs of docs/clients.md with:
#   - the Python packages of tests/clients/requirements.txt, into the virtual environment
#     target/venv-clients (SQLAlchemy with psycopg 3, Django);
#   - Patroni, for tests/replication/patroni.rs, as tests/patroni/requirements.txt pins it, into
#     /opt/pg_snowflake-tests/patroni;
#   - the npm packages of tests/js/package.json (node-postgres and Drizzle ORM beside the
#     decoder of tests/ids/decoder_js.rs), exactly as tests/js/package-lock.json pins them.
# What is already installed at the pinned version is left alone: a second run takes about a
# second. Needs python3 (with its venv module), node and npm.
set -euo pipefail
cd "$(dirname "$0")/../.."

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '%s: %s\n' "$0" "$*" >&2; exit 1; }

# Exit status 0 when every `name==version` line of REQUIREMENTS is installed in VENV at that
# version.
python_pins_met() {
  local venv=$1 requirements=$2
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - "$requirements" <<'EOF'
import sys
from importlib import metadata
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, version = line.split("==")
    name = name.split("[")[0]
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if installed != version:
        sys.exit(1)
EOF
}

# python_env VENV PYTHON REQUIREMENTS WHAT: a virtual environment of PYTHON holding exactly the
# pinned REQUIREMENTS.
python_env() {
  local venv=$1 python=$2 requirements=$3 what=$4
  python_pins_met "$venv" "$requirements" && return 0
  command -v "$python" >/dev/null || die "$python is missing"
  "$python" -c 'import ensurepip, venv' 2>/dev/null ||
    die "$python cannot make virtual environments (Debian: apt-get install python3-venv)"
  say "installing $what into $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  python_pins_met "$venv" "$requirements" || die "$venv does not hold the versions of $requirements after pip install"
}

python_env target/venv-clients python3 tests/clients/requirements.txt "the Python clients of docs/clients.md"
# Patroni runs as postgres (it refuses root), so its environment lives where postgres can read
# it (a checkout under /root is closed to it), on Debian's own Python (pyenv's may be under
# /root too).
python_env /opt/pg_snowflake-tests/patroni /usr/bin/python3 tests/patroni/requirements.txt "Patroni"

# Exit status 0 when every dependency of tests/js/package.json is in node_modules at its version.
node_pins_met() {
  node - <<'EOF'
const fs = require("fs");
const dir = "tests/js";
const wanted = JSON.parse(fs.readFileSync(`${dir}/package.json`, "utf8")).dependencies;
for (const [name, version] of Object.entries(wanted)) {
  const file = `${dir}/node_modules/${name}/package.json`;
  if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file, "utf8")).version !== version) {
    process.exit(1);
  }
}
EOF
}

command -v node >/dev/null || die "node is missing (Debian: apt-get install nodejs npm)"
if ! node_pins_met; then
  command -v npm >/dev/null || die "npm is missing (Debian: apt-get install npm)"
  say "installing the JavaScript packages of tests/js"
  npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
  node_pins_met || die "tests/js/node_modules does not hold the versions of tests/js/package.json after npm ci"
fi
