import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

const REPO = fileURLToPath(new URL('../..', import.meta.url))

/**
 * The manual as a reader finds it: the README, then every guide under docs/ (not the generated
 * reference, which --help itself is compared with), in name order.
 */
export async function readManual(): Promise<string> {
  const guides = (await readdir(join(REPO, 'docs')).catch(() => [] as string[])).filter((name) => name.endsWith('.md')).sort()
  const texts = await Promise.all([join(REPO, 'README.md'), ...guides.map((name) => join(REPO, 'docs', name))].map(async (file) => readFile(file, 'utf8')))
  return texts.join('\n')
}
