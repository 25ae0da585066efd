#!/usr/bin/env node
// Builds dist/cli.cjs: src/ and its dependencies bundled by esbuild into one CommonJS
// file (code that commands import lazily stays lazy: it is only evaluated when needed),
// then a V8 code cache for it (dist/cli.cjs.cache) taken after one real `plan`, so that
// bin/run.js starts without compiling ~0.5 MB of JavaScript. Type checking is
// `tsc --noEmit`, separately (npm run build runs both).
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {readFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {build} from 'esbuild'

import {buildVersion} from './version.js'

const root = fileURLToPath(new URL('..', import.meta.url))

/**
 * Large packages only some commands use (undici, ~0.5 MB: fleet status's Prometheus
 * client, and a fetch through a proxy; a plain fetch uses node:http; age-encryption,
 * ~0.3 MB: only an encrypted node input or node-key needs it): bundled apart, so
 * that every start-up does not read and load them with the rest. localpuppet's own
 * imports of them (always from lazily imported modules) load dist/<name>.cjs.
 */
const LAZY_PACKAGES = ['undici', 'age-encryption']
const lazyPackages = {
  name: 'lazy-packages',
  setup(build) {
    build.onResolve({filter: new RegExp(`^(${LAZY_PACKAGES.join('|')})$`)}, (args) => (args.importer.includes('node_modules') ? undefined : {path: `./${args.path}.cjs`, external: true}))
  },
}
/**
 * oclif sorts the command list with String#localeCompare on every start: the first
 * localeCompare in a process loads ICU's collation data, ~8 ms of every command. Command
 * ids here are lower-case ASCII words, for which code-unit order is the same order. The
 * build fails if oclif's source no longer has that line, or if that file is no longer
 * bundled (the patch would silently stop applying).
 */
const OCLIF_SORT = {
  file: /@oclif[\\/]core[\\/]lib[\\/]config[\\/]plugin\.js$/,
  from: '.sort((a, b) => a.id.localeCompare(b.id))',
  to: '.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))',
}
let oclifSorted = false
const oclifSort = {
  name: 'oclif-sort',
  setup(build) {
    build.onEnd(() => {
      if (!oclifSorted) throw new Error('@oclif/core/lib/config/plugin.js was not bundled: update OCLIF_SORT in bin/build.js')
    })
    build.onLoad({filter: OCLIF_SORT.file}, async (args) => {
      oclifSorted = true
      const source = await readFile(args.path, 'utf8')
      if (!source.includes(OCLIF_SORT.from)) throw new Error(`${args.path}: no longer sorts commands with localeCompare; update OCLIF_SORT in bin/build.js`)
      return {contents: source.replace(OCLIF_SORT.from, OCLIF_SORT.to), loader: 'js'}
    })
  },
}
/** What every bundle shares. */
const COMMON = {
  absWorkingDir: root,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  // Debian 12's nodejs (18.19, 18.20) runs the package: see bin/deb.
  target: 'node18',
  minify: true,
  // Class names stay readable in stack traces and error names.
  keepNames: true,
  logLevel: 'warning',
}

rmSync(join(root, 'dist'), {recursive: true, force: true})
// What `localpuppet --version` says and bin/deb names the package after (see bin/version.js).
mkdirSync(join(root, 'dist'))
writeFileSync(join(root, 'dist', 'build.json'), `${JSON.stringify(buildVersion(root))}\n`)
await build({
  ...COMMON,
  entryPoints: {cli: 'src/commands/index.ts'},
  outdir: 'dist',
  outExtension: {'.js': '.cjs'},
  // Stack traces for bug reports (exit 70) map back to src/ with --enable-source-maps.
  sourcemap: 'linked',
  sourcesContent: false,
  define: {'import.meta.url': '__lpModuleUrl'},
  banner: {js: "const __lpModuleUrl = require('node:url').pathToFileURL(__filename).href;"},
  // oclif loads these only to run TypeScript sources in development.
  external: ['typescript', 'ts-node', 'tsx'],
  plugins: [lazyPackages, oclifSort],
})

// The packages above, each bundled into a file of its own beside cli.cjs.
// undici 7 uses the global File, which Node 18 has only in node:buffer; it runs there
// with it (fleet status's Prometheus client, a fetch through a proxy: bin/package-check).
const NODE18_GLOBALS = "if (typeof globalThis.File === 'undefined') globalThis.File = require('node:buffer').File;"
for (const name of LAZY_PACKAGES) {
  await build({...COMMON, banner: {js: NODE18_GLOBALS}, stdin: {contents: `module.exports = require(${JSON.stringify(name)})`, resolveDir: root, loader: 'js'}, outfile: join('dist', `${name}.cjs`)})
}

// One representative run compiles the start-up path; bin/run.js saves the cache on exit.
const scratch = mkdtempSync(join(tmpdir(), 'localpuppet-build-'))
try {
  const demo = join(root, 'fixtures', 'demo')
  execFileSync(process.execPath, [join(root, 'bin', 'run.js'), 'plan', join(demo, 'input.yaml'), '--module-dir', join(demo, 'modules'), '--state-dir', scratch, '--json'], {
    env: {...process.env, LOCALPUPPET_CODE_CACHE_OUT: join(root, 'dist', 'cli.cjs.cache')},
    stdio: 'ignore',
  })
} finally {
  rmSync(scratch, {recursive: true, force: true})
}
