/**
 * `node --import=tsx/esm test/helpers/install-peak.ts ARCHIVE MODULE_DIR`: installs one
 * archive in a process of its own and prints `{exitCode, message, maxRssMb}` as JSON, so
 * a test can see what a hostile archive costs in memory.
 */
import {installArchive} from '../../src/lib/install/install-archive.js'
import {openArchive} from '../../src/lib/install/open-archive.js'
import {LocalpuppetError} from '../../src/lib/errors.js'

const [archive, moduleDir] = process.argv.slice(2)
let exitCode = 0
let message = ''
try {
  const {stream, label} = await openArchive(archive)
  await installArchive(stream, label, {moduleDir, trustDir: null})
} catch (error) {
  exitCode = error instanceof LocalpuppetError ? error.exitCode : 70
  message = error instanceof Error ? error.message : String(error)
}

process.stdout.write(JSON.stringify({exitCode, message, maxRssMb: process.resourceUsage().maxRSS / 1024}) + '\n')
