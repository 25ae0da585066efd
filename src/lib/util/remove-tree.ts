import {execFile} from 'node:child_process'
import {rm} from 'node:fs/promises'

/** Removes a scratch module directory; installed tags in it are read-only. */
export async function removeTree(dir: string): Promise<void> {
  await new Promise((done) => execFile('chmod', ['-R', 'u+w', dir], () => done(null)))
  await rm(dir, {recursive: true, force: true})
}
