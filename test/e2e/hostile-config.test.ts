// Issue 26, the hostile campaign: the node configuration file (/etc/localpuppet/config.yaml,
// or LOCALPUPPET_CONFIG) names what root runs and where it writes. Another user's file, a
// link into their files, a huge or endless file and hostile values: each one line with the
// README's exit code, never a hang, never 70.
import {execFileSync} from 'node:child_process'
import {chmod, chown, mkdir, rename, symlink, writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test, {type ExecutionContext} from 'ava'

import {cli} from '../helpers/cli.js'
import {asHostile, hostileUid} from '../helpers/hostile-user.js'
import {tempDir} from '../helpers/temp.js'

const uid = hostileUid()
const asRoot = uid === null ? test.skip : test

async function config(t: ExecutionContext, path: string, exitCode: number, message: RegExp) {
  const dir = await tempDir(t)
  const result = await cli(['config'], {env: {LOCALPUPPET_CONFIG: path, LOCALPUPPET_STATE_DIR: dir}})
  t.is(result.exitCode, exitCode, `${path}: ${result.stderr}`)
  t.regex(result.stderr, message)
  t.is(result.stderr.trimEnd().split('\n').length, 1, `one line: ${result.stderr}`)
}

/** A temp dir root owns that the hostile user can traverse, with a directory the hostile user owns inside. */
async function places(t: ExecutionContext) {
  const dir = await tempDir(t)
  await chmod(dir, 0o755)
  const theirs = join(dir, 'theirs')
  await mkdir(theirs, {mode: 0o755})
  await chown(theirs, uid!, uid!)
  return {dir, theirs}
}

asRoot('a configuration that is a link to another user\'s file, or into a directory another user owns, is refused (77) naming it', async (t) => {
  const {dir, theirs} = await places(t)
  // Their own file, written by them.
  const owned = join(theirs, 'config.yaml')
  asHostile(`printf 'puppet: /tmp/evil\\n' > ${owned}`)
  const link = join(dir, 'config.yaml')
  await symlink(owned, link)
  await config(t, link, 77, /configuration('s parent directory)? .* is not trusted: owned by uid \d+/)

  // A root-owned file in their directory: they can swap it for another at any time.
  const swappable = join(theirs, 'root.yaml')
  await writeFile(swappable, 'puppet: /usr/bin/puppet\n')
  const viaLink = join(dir, 'via-link.yaml')
  await symlink(swappable, viaLink)
  await config(t, viaLink, 77, /is not trusted: .*owned by uid \d+/)
  await config(t, swappable, 77, /is not trusted: .*owned by uid \d+/)
  // What they can do with it: put their own in its place.
  asHostile(`mv -f ${owned} ${swappable}`)
  await config(t, swappable, 77, /is not trusted: .*owned by uid \d+/)
})

asRoot('a configuration file another user owns but cannot write any more (0444) is still theirs (77)', async (t) => {
  const {dir, theirs} = await places(t)
  const file = join(theirs, 'config.yaml')
  asHostile(`printf 'puppet: /tmp/evil\\n' > ${file} && chmod 0444 ${file}`)
  // Moved by root into a directory of root's: the file is still theirs (they may chmod it back at any time).
  await rename(file, join(dir, 'config.yaml'))
  await config(t, join(dir, 'config.yaml'), 77, /owned by uid \d+, not root/)
})

test('a huge configuration, /dev/zero, a FIFO with no writer, a directory: refused at once (65)', async (t) => {
  const dir = await tempDir(t)
  const huge = join(dir, 'huge.yaml')
  await writeFile(huge, `# ${'x'.repeat(2 * 1024 * 1024)}\nmodule_dir: /srv\n`)
  await config(t, huge, 65, /configuration .*huge\.yaml: larger than 1 MiB/)
  await config(t, '/dev/zero', 65, /configuration \/dev\/zero: is a device, expected a regular file/)
  const fifo = join(dir, 'fifo.yaml')
  execFileSync('mkfifo', [fifo])
  await config(t, fifo, 65, /fifo\.yaml: is a FIFO \(named pipe\), expected a regular file/)
  await config(t, dir, 65, /is a directory, expected a regular file/)
})

test('hostile values: wrong types, relative paths, control characters in paths, an alias bomb, unknown tags, __proto__, bytes that are not UTF-8 (65, naming the key and line)', async (t) => {
  const dir = await tempDir(t)
  const cases: Array<[string, string | Buffer, RegExp]> = [
    ['number', 'module_dir: 5\n', /:1: module_dir: expected a path, got number 5/],
    ['mapping', 'puppet: {a: 1}\n', /:1: puppet: expected a command name or an absolute path, got a mapping/],
    ['args as a string', 'puppet_args: --noop\n', /:1: puppet_args: expected a list of strings, got string "--noop"/],
    ['list of numbers', 'trust: [1, 2]\n', /:1: trust: expected a path or a list of paths/],
    ['relative', 'state_dir: var/lib/x\n', /:1: state_dir: expected an absolute path, got string "var\/lib\/x"/],
    ['newline in a path', 'module_dir: "/etc/puppet/modules\\n/tmp"\n', /:1: module_dir: expected an absolute path without control characters, got string "\/etc\/puppet\/modules\\n\/tmp"/],
    ['newline in the metrics file', 'metrics_file: "/var/lib/node.prom\\nlocalpuppet_up 1"\n', /:1: metrics_file: expected an absolute path without control characters/],
    ['escape in the puppet command', 'puppet: "/usr/bin/puppet\\e[2J"\n', /:1: puppet: expected a command name or an absolute path without control characters/],
    ['NUL in a trusted key', 'trust: ["/etc/k.pem\\0"]\n', /:1: trust: expected a path or a list of paths without control characters/],
    ['newline in an argument', 'puppet_args: ["--logdest\\nsyslog"]\n', /:1: puppet_args: expected a list of strings without control characters/],
    ['alias bomb', `a: &a [x, x, x, x, x, x, x, x, x]\n${Array.from({length: 12}, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}]`).join('\n')}\n`, /not valid YAML|unknown setting "a"/],
    ['unknown tag', 'module_dir: !!js/function "function () {}"\n', /:1: (not valid YAML|module_dir: expected)/],
    ['__proto__', '__proto__: {module_dir: /tmp}\n', /:1: unknown setting "__proto__"/],
    ['not UTF-8', Buffer.from([0x6d, 0x6f, 0x64, 0x75, 0x6c, 0x65, 0x5f, 0x64, 0x69, 0x72, 0x3a, 0x20, 0x2f, 0xff, 0x0a]), /:1: invalid UTF-8 \(byte 0xff at offset 13\)/],
    ['a list', '- module_dir: /srv\n', /:1: expected a mapping of settings/],
    ['a duplicate key', 'source: https://a.example\nsource: https://b.example\n', /:2: not valid YAML \(Map keys must be unique/],
  ]
  for (const [name, text, message] of cases) {
    const file = join(dir, `${name.replaceAll(' ', '-')}.yaml`)
    await writeFile(file, text)
    await config(t, file, 65, message)
  }
})
