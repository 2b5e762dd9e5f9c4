// `npm start`: builds first only when a source is newer than the build (npm install has built a
// fresh clone already), so the daemon starts in a second instead of after a full compile.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const root = fileURLToPath(new URL('..', import.meta.url));
const mtime = (path) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
};
const newest = (dir) => {
  let m = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    m = Math.max(m, e.isDirectory() ? newest(p) : mtime(p));
  }
  return m;
};
const built = mtime(join(root, 'dist', 'main.js'));
const sources = Math.max(
  newest(join(root, 'src')),
  mtime(join(root, 'package.json')),
  mtime(join(root, 'tsconfig.json')),
  mtime(join(root, 'scripts', 'tsconfig.build.json')),
);
if (built === 0 || sources > built) execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
