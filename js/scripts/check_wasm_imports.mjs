// Fails when a .wasm imports from `env`: zstd compiled with the wrong C compiler leaves
// unresolved `env.ZSTD_*` imports that only fail at instantiation.
import { readFileSync } from 'node:fs';

let failed = false;
for (const file of process.argv.slice(2)) {
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(readFileSync(file)));
  const env = imports.filter((i) => i.module === 'env');
  if (env.length) {
    failed = true;
    console.error(`${file}: imports from env: ${env.map((i) => i.name).join(', ')}`);
  } else {
    console.log(`${file}: ${imports.length} imports, none from env`);
  }
}
process.exitCode = failed ? 1 : 0;
