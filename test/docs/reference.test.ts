import {readFileSync, readdirSync} from 'node:fs'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

// @ts-expect-error bin/reference.js is a plain JavaScript build script
import {commandReference, markdownIndex, markdownPage} from '../../bin/reference.js'

interface Reference {
  id: string
  name: string
  file: string
  summary: string
  flags: {name: string}[]
  exitCodes: {code: string}[]
}

const dir = join(import.meta.dirname, '..', '..', 'docs', 'reference')
const commands = (await commandReference()) as Reference[]

test('docs/reference is what the commands define now (else: npm run build && npm run reference)', (t) => {
  const expected = new Map<string, string>([['README.md', markdownIndex(commands) as string], ...commands.map((command): [string, string] => [`${command.file}.md`, markdownPage(command) as string])])
  t.deepEqual(readdirSync(dir).filter((file) => file.endsWith('.md')).sort(), [...expected.keys()].sort(), 'one page per command, no page for a command that is gone')
  for (const [file, text] of expected) t.is(readFileSync(join(dir, file), 'utf8'), text, `docs/reference/${file} is stale`)
})

/** The flags (long names) and exit codes a page of docs/reference lists. */
function fromPage(text: string): {flags: string[]; codes: string[]} {
  const section = (title: string) => text.split(`\n## ${title}\n`)[1]?.split('\n## ')[0] ?? ''
  return {
    flags: [...section('Flags').matchAll(/^- `(?:-\w, )?--([a-z0-9-]+)/gm)].map((m) => m[1]).sort(),
    codes: [...section('Exit codes').matchAll(/^\| (\d[\d/]*) \|/gm)].map((m) => m[1]),
  }
}

/** The same, read from what `--help` prints: a flag's line has its name, then `=VALUE`, two spaces or nothing (a description's line may start with `--via ssh:`). */
function fromHelp(help: string): {flags: string[]; codes: string[]} {
  const flagLines = help.split(/\n(?=[A-Z][A-Z ]+\n)/).filter((block) => /^(GLOBAL )?FLAGS\n|^[A-Z ]+ FLAGS\n/.test(block))
  const codes = help.split('\n  EXIT CODES\n')[1]?.split('\n\n')[0] ?? ''
  return {
    flags: flagLines.flatMap((block) => [...block.matchAll(/^ {2}(?:-\w, | {4})?--([a-z0-9-]+)(?:=\S*)?(?: {2,}|$)/gm)].map((m) => m[1])).sort(),
    codes: [...codes.matchAll(/^ {2}(\d[\d/]*) /gm)].map((m) => m[1]),
  }
}

test('each page of docs/reference lists the flags and exit codes that --help shows, and its summary', async (t) => {
  t.true(commands.length > 20)
  for (const command of commands) {
    const {stdout} = await execa('node', ['bin/run.js', ...command.id.split(':'), '--help'], {env: {COLUMNS: '80'}})
    const page = readFileSync(join(dir, `${command.file}.md`), 'utf8')
    t.deepEqual(fromPage(page), fromHelp(stdout), `${command.name}: docs/reference/${command.file}.md against --help`)
    t.true(stdout.startsWith(command.summary), `${command.name}: --help starts with the summary`)
    t.true(page.includes(command.summary.replaceAll('_', '\\_').replaceAll('*', '\\*')), `${command.name}: the page has the summary`)
  }
})
