// Reads "id unix_ms worker_id sequence" lines (pg_snowflake's decode) on stdin, decodes each id
// with @sapphire/snowflake (its TwitterSnowflake, or its DiscordSnowflake when the first argument
// is "discord"), and prints mismatches and a summary line.
import { DiscordSnowflake, TwitterSnowflake } from '@sapphire/snowflake';
import { createInterface } from 'node:readline';

const decoder = process.argv[2] === 'discord' ? DiscordSnowflake : TwitterSnowflake;
let checked = 0;
let mismatches = 0;
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const [id, ms, worker, seq] = line.trim().split(/\s+/);
  const d = decoder.deconstruct(id);
  const theirs = [d.timestamp, (d.workerId << 5n) | d.processId, d.increment].map(String);
  const ours = [ms, worker, seq];
  checked += 1;
  if (theirs.join(' ') !== ours.join(' ')) {
    mismatches += 1;
    if (mismatches <= 10) console.log(`mismatch for ${id}: ours ${ours} theirs ${theirs}`);
  }
}
console.log(`checked ${checked} ids, ${mismatches} mismatches`);
