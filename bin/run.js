#!/usr/bin/env node
// Starts localpuppet from dist/cli.cjs (src/ bundled by bin/build.js) with the V8 code
// cache the build made beside it: start-up then skips compiling the bundle. V8 rejects a
// cache from another Node version, and the code is compiled as usual.
import {readFileSync, realpathSync, writeFileSync} from 'node:fs'
import Module, {createRequire} from 'node:module'
import {dirname} from 'node:path'
import {fileURLToPath} from 'node:url'
import vm from 'node:vm'

let file
try {
  file = realpathSync(fileURLToPath(new URL('../dist/cli.cjs', import.meta.url)))
} catch {
  process.stderr.write('localpuppet: dist/cli.cjs is missing: run `npm run build` (or bin/setup) first\n')
  process.exit(70)
}

// Node before 20.12 (Debian 12's nodejs is 18.19 or 18.20) has no main-context loader for
// a vm.Script's import(): there the bundle is required as any module, without the cache.
if (vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER === undefined) await createRequire(file)(file).run()
else await runWithCodeCache()

/** Compiles the bundle with the build's V8 code cache and runs it. */
async function runWithCodeCache() {
  let cachedData
  try {
    cachedData = readFileSync(`${file}.cache`)
  } catch {}

  // oclif checks the Node version against package.json's engines with semver on every
  // start (~5 ms); the bundle is built for the Node it requires, so that check is skipped.
  // Not passed on to the children localpuppet starts.
  const engineWarning = process.env.OCLIF_DISABLE_ENGINE_WARNING
  process.env.OCLIF_DISABLE_ENGINE_WARNING = '1'

  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${readFileSync(file, 'utf8')}\n})`, {
    filename: file,
    cachedData,
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  })
  // Registered as a CommonJS module so that oclif, which requires the same file to find
  // the commands, gets this instance instead of evaluating the bundle a second time.
  const cli = new Module(file)
  cli.filename = file
  cli.paths = Module._nodeModulePaths(dirname(file))
  createRequire(file).cache[file] = cli
  script.runInThisContext()(cli.exports, createRequire(file), cli, file, dirname(file))
  cli.loaded = true
  if (engineWarning === undefined) delete process.env.OCLIF_DISABLE_ENGINE_WARNING
  else process.env.OCLIF_DISABLE_ENGINE_WARNING = engineWarning

  if (process.env.LOCALPUPPET_CODE_CACHE_OUT) {
    const out = process.env.LOCALPUPPET_CODE_CACHE_OUT
    process.once('exit', () => writeFileSync(out, script.createCachedData()))
  }

  await cli.exports.run()
}
