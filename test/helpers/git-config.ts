import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/**
 * Loaded by ava into every test worker (package.json `ava.require`), before any test file:
 * git, run by the tests and by every localpuppet process they start, reads a global
 * configuration the tests own and no system one. So a machine's `safe.directory = *`,
 * `init.defaultBranch` or hooks path cannot change what a test sees (issue 27, item 9).
 * The file holds only an identity, so that commits in test repositories work anywhere.
 */
export const TEST_GIT_CONFIG = '[user]\n\tname = localpuppet tests\n\temail = tests@localpuppet.invalid\n'

export default function isolateGit(): void {
  const dir = mkdtempSync(join(tmpdir(), 'localpuppet-gitconfig-'))
  const file = join(dir, 'gitconfig')
  writeFileSync(file, TEST_GIT_CONFIG, {mode: 0o600})
  process.env.GIT_CONFIG_GLOBAL = file
  process.env.GIT_CONFIG_NOSYSTEM = '1'
  // The repository-local configuration is the test's own; a parent's GIT_CONFIG_* (`git -c` passed down) is not.
  for (const key of Object.keys(process.env)) {
    if (/^GIT_CONFIG_(COUNT|KEY_\d+|VALUE_\d+|PARAMETERS)$/.test(key)) delete process.env[key]
  }

  process.once('exit', () => rmSync(dir, {recursive: true, force: true}))
}
