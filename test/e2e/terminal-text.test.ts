// Issue 33: text from outside (Puppet's words, a disable message, a server's answer, a
// source URL's credentials) as a person sees it: escaped on one line, URLs without their
// password; --json exact (URLs aside).
import {spawnSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {gunzipSync, gzipSync} from 'node:zlib'

import test from 'ava'
import {Header, Pax} from 'tar'

import {FAKE_PUPPET, FIXTURES, cli, isolatePuppet} from '../helpers/cli.js'
import {hostileServer} from '../helpers/hostile-server.js'
import {demoRepository, keyPair, testServer} from '../helpers/repository.js'
import {readEntries} from '../helpers/snapshot.js'
import {tempDir, writeTree} from '../helpers/temp.js'

const TITLE = '\u001B]0;owned\u0007'
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F]/

test("a release whose code fails with an escape sequence and a newline, and a disable message with them: apply, status, history, log, disable and enable show each escaped on its line; status --json keeps them exact", async (t) => {
  const dir = await tempDir(t)
  // Puppet's double-quoted string: ESC ] 0 ; owned BEL, a newline, and a line that would pass for ours.
  await writeTree(dir, {
    'modules/evil/trunk/evil/manifests/init.pp': 'class evil {\n  fail("\\u001B]0;owned\\u0007\\nlocalpuppet: succeeded evil/trunk")\n}\n',
    'input.yaml': 'app: evil/trunk\nclasses:\n  - evil\n',
  })
  const state = join(dir, 'state')
  const puppet = ['--', ...isolatePuppet(dir)]
  const applied = await cli(['apply', join(dir, 'input.yaml'), '--module-dir', join(dir, 'modules'), '--state-dir', state, ...puppet])
  t.is(applied.exitCode, 1, applied.stderr)
  // apply streams Puppet's words as they come: escaped there too.
  t.false(CONTROL.test(applied.stdout + applied.stderr), applied.stderr)
  t.regex(applied.stderr, /Function Call, \\e\]0;owned\\u0007\n/)

  const json = await cli(['status', '--state-dir', state, '--json', ...puppet])
  const record = JSON.parse(json.stdout)
  t.true(record.firstError.startsWith('Error: '), record.firstError)
  t.true(record.firstError.endsWith(TITLE), 'the record and --json keep Puppet\'s line exact')

  const status = await cli(['status', '--state-dir', state, ...puppet])
  t.is(status.exitCode, 1, status.stderr)
  t.false(CONTROL.test(status.stdout), 'no control character reaches the terminal')
  t.regex(status.stdout, /^puppet said +Error: .*Function Call, \\e\]0;owned\\u0007$/m)

  const history = await cli(['history', '--state-dir', state])
  t.false(CONTROL.test(history.stdout))
  t.is(history.stdout.split('\n').length, 2, 'a header and one row')

  const log = await cli(['log', '--state-dir', state])
  t.is(log.exitCode, 0)
  t.false(CONTROL.test(log.stdout), 'no control character reaches the terminal')
  t.regex(log.stdout, /Function Call, \\e\]0;owned\\u0007\n/)
  // The log file itself keeps Puppet's bytes.
  t.true((await readFile(join(state, 'runs', record.id, 'puppet.log'), 'utf8')).includes(TITLE))

  // A disable message, as the node's operator (or whoever wrote Puppet's lock file) gave it.
  const message = `maintenance${TITLE}\nlocalpuppet: enabled`
  const disabled = await cli(['disable', message, '--state-dir', state, ...puppet])
  t.is(disabled.exitCode, 0, disabled.stderr)
  t.false(CONTROL.test(disabled.stdout))
  t.regex(disabled.stdout, /^disabled: maintenance\\e\]0;owned\\u0007\\nlocalpuppet: enabled \(/)
  t.is(JSON.parse((await cli(['status', '--state-dir', state, '--json', ...puppet])).stdout).puppetDisabled.message, message)
  const whileDisabled = await cli(['status', '--state-dir', state, ...puppet])
  t.false(CONTROL.test(whileDisabled.stdout))
  t.regex(whileDisabled.stdout, /^puppet +disabled: maintenance\\e\]0;owned\\u0007\\nlocalpuppet: enabled$/m)
  const enabled = await cli(['enable', '--state-dir', state, ...puppet])
  t.is(enabled.exitCode, 0, enabled.stderr)
  t.is(enabled.stdout, 'enabled (was disabled: maintenance\\e]0;owned\\u0007\\nlocalpuppet: enabled)')
})

test('a source URL with a password: config, fetch (output, --json, errors), the node\'s records and apply --fetch\'s run record never show it; the requests still authenticate', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'made'), key)
  const authorizations = new Set<string | undefined>()
  const server = await testServer(repo, (req) => {
    authorizations.add(req.headers.authorization)
    return false
  })
  // A server whose error answer's status line carries an escape sequence.
  const hostile = await hostileServer((_path, socket) => void socket.end(Buffer.from(`HTTP/1.1 403 \u001B]0;owned\u0007\r\nContent-Length: 17\r\nConnection: close\r\n\r\n\u001B[2Jforged\nline\n`, 'latin1')))
  t.teardown(() => Promise.all([server.close(), hostile.close()]))
  const source = `http://ops:s3cret@127.0.0.1:${server.port}/`
  const config = join(dir, 'config.yaml')
  const modules = join(dir, 'modules')
  const state = join(dir, 'state')
  await writeTree(dir, {'config.yaml': `source: ${source}\ntrust:\n  - ${pub}\nmodule_dir: ${modules}\nstate_dir: ${state}\n`})
  await mkdir(modules)
  const env = {LOCALPUPPET_CONFIG: config, LOCALPUPPET_SOURCE: undefined}
  const seen: string[] = []
  const run = async (args: string[], extra: Record<string, string> = {}) => {
    const result = await cli(args, {env: {...env, ...extra}})
    seen.push(result.stdout, result.stderr)
    return result
  }

  const shown = await run(['config'])
  t.is(shown.exitCode, 0, shown.stderr)
  t.regex(shown.stdout, new RegExp(`^source +http://127\\.0\\.0\\.1:${server.port}/ +${config}:1$`, 'm'))
  const json = await run(['config', '--json'])
  t.is(JSON.parse(json.stdout).settings.source.value, `http://127.0.0.1:${server.port}/`)

  const fetched = await run(['fetch', 'foo@^1.4'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.regex(fetched.stdout, new RegExp(`^fetched foo/tags/1\\.4\\.0 from http://127\\.0\\.0\\.1:${server.port}/ `, 'm'))
  t.deepEqual([...authorizations], [`Basic ${Buffer.from('ops:s3cret').toString('base64')}`], 'every request carried the credentials')
  // Through a proxy (undici, which would drop the URL's credentials): the same Authorization; the test server serves a proxied request by its path.
  authorizations.clear()
  const proxied = await run(['fetch', 'foo/tags/1.3.0', '--source', `http://ops:s3cret@127.0.0.1:9/`], {HTTP_PROXY: server.url})
  t.is(proxied.exitCode, 0, proxied.stderr)
  t.deepEqual([...authorizations], [`Basic ${Buffer.from('ops:s3cret').toString('base64')}`], 'through a proxy too')
  const again = await run(['fetch', 'foo/tags/1.3.0', '--json'])
  t.like(JSON.parse(again.stdout), {source: `http://127.0.0.1:${server.port}/`, releases: [{release: 'foo/tags/1.3.0', status: 'already present'}]})
  const missing = await run(['fetch', 'foo/tags/9.9.9'])
  t.is(missing.exitCode, 66)
  t.regex(missing.stderr, new RegExp(`the repository http://127\\.0\\.0\\.1:${server.port}/`))
  const missingJson = await run(['fetch', 'foo/tags/9.9.9', '--json'])
  t.regex(JSON.parse(missingJson.stdout).error.message, /not in the repository http:\/\/127\.0\.0\.1/)

  // The hostile server: 69, one line, nothing it said reaches the terminal, no password.
  const refused = await run(['fetch', 'foo@^1.4', '--source', `http://ops:s3cret@127.0.0.1:${hostile.port}/`])
  t.is(refused.exitCode, 69, refused.stderr)
  t.false(CONTROL.test(refused.stderr), refused.stderr)
  t.is(refused.stderr, `localpuppet: http://127.0.0.1:${hostile.port}/index.json: HTTP 403`)

  // apply --fetch: fetched, then unreachable (the installed release runs): neither run record names the password.
  const fake = join(dir, 'fake')
  const applied = await run(['apply', join(FIXTURES, 'demo', 'input.yaml'), '--fetch', '--puppet', FAKE_PUPPET], {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0'})
  t.is(applied.exitCode, 0, applied.stderr)
  const fallback = await run(['apply', join(FIXTURES, 'demo', 'input.yaml'), '--fetch', '--puppet', FAKE_PUPPET], {FAKE_PUPPET_DIR: fake, FAKE_PUPPET_SLEEP: '0', LOCALPUPPET_SOURCE: `http://ops:s3cret@127.0.0.1:${hostile.port}/`})
  t.is(fallback.exitCode, 0, fallback.stderr)
  const record = JSON.parse((await run(['status', '--json'])).stdout)
  t.is(record.fetch.source, `http://127.0.0.1:${hostile.port}/`)
  t.true(record.fetch.fallback)
  t.regex((await run(['status'])).stdout, new RegExp(`^fetch +failed, ran the installed release: http://127\\.0\\.0\\.1:${hostile.port}/: `, 'm'))
  await run(['history', '--json'])

  for (const output of seen) t.false(output.includes('s3cret'), output)
  const written = spawnSync('grep', ['-rl', 's3cret', modules, state], {encoding: 'utf8'})
  t.is(written.status, 1, `no file the node wrote holds the password: ${written.stdout}`)
})

test('a URL with a credential in its query (?token=, ?access_token=): config, fetch (output, --json, errors), the node\'s records and fleet status --puppetdb (message and --json) show it redacted', async (t) => {
  const dir = await tempDir(t)
  const {key, pub} = await keyPair(dir, 'release')
  const {repo} = await demoRepository(join(dir, 'made'), key)
  const server = await testServer(repo, () => false)
  t.teardown(() => server.close())
  const modules = join(dir, 'modules')
  const state = join(dir, 'state')
  const config = join(dir, 'config.yaml')
  await writeTree(dir, {'config.yaml': `source: http://127.0.0.1:${server.port}/?token=S3CRET&Access_Token=S3CRET\ntrust:\n  - ${pub}\nmodule_dir: ${modules}\nstate_dir: ${state}\n`})
  await mkdir(modules)
  const env = {LOCALPUPPET_CONFIG: config, LOCALPUPPET_SOURCE: undefined}
  const shownSource = `http://127.0.0.1:${server.port}/?token=redacted&Access_Token=redacted`
  const seen: string[] = []
  const run = async (args: string[]) => {
    const result = await cli(args, {env})
    seen.push(result.stdout, result.stderr)
    return result
  }

  t.true((await run(['config'])).stdout.includes(shownSource))
  t.is(JSON.parse((await run(['config', '--json'])).stdout).settings.source.value, shownSource)
  const fetched = await run(['fetch', 'foo@^1.4'])
  t.is(fetched.exitCode, 0, fetched.stderr)
  t.true(fetched.stdout.includes(`from ${shownSource} `), fetched.stdout)
  t.is(JSON.parse((await run(['fetch', 'foo/tags/1.4.0', '--json'])).stdout).source, shownSource)
  const missing = await run(['fetch', 'foo/tags/9.9.9', '--json'])
  t.is(missing.exitCode, 66)
  t.true(JSON.parse(missing.stdout).error.message.includes(shownSource), missing.stdout)
  const unreachable = await run(['repository', 'list', '--source', 'http://127.0.0.1:1/repo/?X-Amz-Signature=S3CRET', '--insecure'])
  t.is(unreachable.exitCode, 69)
  t.regex(unreachable.stderr, /^localpuppet: repository http:\/\/127\.0\.0\.1:1\/repo\/\?X-Amz-Signature=redacted /)

  for (const json of [false, true]) {
    const fleet = await run(['fleet', 'status', '--puppetdb', 'http://127.0.0.1:1/?token=S3CRET', ...(json ? ['--json'] : [])])
    t.is(fleet.exitCode, 69, fleet.stderr)
    t.true((json ? JSON.parse(fleet.stdout).error.message : fleet.stderr).includes('http://127.0.0.1:1/?token=redacted '), fleet.stdout + fleet.stderr)
  }

  for (const output of seen) t.false(output.includes('S3CRET'), output)
  // fetch writes under the module directory only (no state directory yet).
  const written = spawnSync('grep', ['-rl', 'S3CRET', modules], {encoding: 'utf8'})
  t.is(written.status, 1, `no file the node wrote holds the token: ${written.stdout}`)
})

test('plan shows an input value with a bidi override and a fact with an escape sequence escaped, each on its line; plan --json keeps them exact', async (t) => {
  const dir = await tempDir(t)
  await writeTree(dir, {'input.yaml': 'app: foo@^1.4\nclasses:\n  foo:\n    port: "80\\u202E\\e]0;owned\\a"\n'})
  const args = ['plan', join(dir, 'input.yaml'), '--module-dir', join(FIXTURES, 'demo', 'modules'), '--state-dir', join(dir, 'state'), '--fact', `role=web${TITLE}`]
  const plan = await cli(args)
  t.is(plan.exitCode, 0, plan.stderr)
  t.false(/[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u202E]/.test(plan.stdout), plan.stdout)
  t.regex(plan.stdout, /^facts +role=web\\e\]0;owned\\u0007$/m)
  t.regex(plan.stdout, /^ {6}port: "80\\u202e\\e\]0;owned\\a"$/m)
  t.regex(plan.stdout, /^ {2}FACTER_role="web\\u001b\]0;owned\\u0007" /m)
  const json = JSON.parse((await cli([...args, '--json'])).stdout)
  t.is(json.facts.role, `web${TITLE}`)
  t.is(json.enc.classes.foo.port, `80\u202E${TITLE}`)
})

test("an archive with an entry whose name carries an escape sequence, a C1 control and a bidi override: install's refusal names it escaped on one line (65); --json keeps it exact", async (t) => {
  const dir = await tempDir(t)
  const archive = join(dir, 'foo.tar.gz')
  const packed = await cli(['pack', 'foo/tags/1.3.0', '--module-dir', join(FIXTURES, 'demo', 'modules'), '-o', archive])
  t.is(packed.exitCode, 0, packed.stderr)
  const name = `foo/tags/1.3.0/${TITLE}\u009B2J\u202Ex.pp`
  const blocks: Buffer[] = []
  for (const entry of [...(await readEntries(gunzipSync(await readFile(archive)))), {path: name, type: 'File', mode: 0o644, data: Buffer.from('x')}]) {
    const header = new Header({path: entry.path, type: entry.type as Header['type'], mode: entry.mode, uid: 0, gid: 0, size: entry.data.length, mtime: new Date(0), uname: '', gname: ''})
    // A name ustar cannot hold goes in a pax header first, as tar writes it.
    if (header.encode()) blocks.push(new Pax({path: entry.path, size: entry.data.length}).encode())
    blocks.push(header.block!, entry.data, Buffer.alloc((512 - (entry.data.length % 512)) % 512))
  }

  await writeFile(archive, gzipSync(Buffer.concat([...blocks, Buffer.alloc(1024)])))
  await mkdir(join(dir, 'modules'))
  const refused = await cli(['install', archive, '--module-dir', join(dir, 'modules')])
  t.is(refused.exitCode, 65, refused.stderr)
  t.false(/[\u0000-\u001F\u007F-\u009F\u202E]/.test(refused.stderr), refused.stderr)
  t.true(refused.stderr.startsWith(`localpuppet: ${archive}: entry "foo/tags/1.3.0/\\u001b]0;owned\\u0007\\u009b2J\\u202ex.pp": `), refused.stderr)
  t.is(refused.stderr.split('\n').length, 1)
  const json = await cli(['install', archive, '--module-dir', join(dir, 'modules'), '--json'])
  t.true(JSON.parse(json.stdout).error.message.includes(JSON.stringify(name)))
})

test('releases and verify name an app or tag directory with an escape sequence, a C1 control or a bidi override escaped, one line each', async (t) => {
  const dir = await tempDir(t)
  const modules = join(dir, 'modules')
  await mkdir(join(modules, `ev${TITLE}il`, 'tags', '1.0.0'), {recursive: true})
  await mkdir(join(modules, 'foo', 'tags', '1.0.0\u009B2J\u202E'), {recursive: true})
  const releases = await cli(['releases', '--module-dir', modules])
  t.is(releases.exitCode, 0, releases.stderr)
  t.false(/[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u202E]/.test(releases.stdout), releases.stdout)
  t.regex(releases.stdout, /^ev\\e\]0;owned\\u0007il$/m)
  t.regex(releases.stdout, /^ {2}"1\.0\.0\\u009b2J\\u202e" +no record$/m)
  const json = JSON.parse((await cli(['releases', '--module-dir', modules, '--json'])).stdout)
  t.true(json.some((app: {app: string}) => app.app === `ev${TITLE}il`))
  const verify = await cli(['verify', `foo/tags/1.0.0\u009B2J\u202E`, '--module-dir', modules])
  t.false(/[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u202E]/.test(verify.stdout + verify.stderr), verify.stdout + verify.stderr)
})
