import {chmod, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {REPO} from '../helpers/cli.js'

/*
 * The `mco localpuppet` application without a broker: apply and status are a thin front
 * that hands the command line to `localpuppet rollout` / `localpuppet fleet status` (one
 * rollout engine whichever door is used), translating the older flags; history and log
 * keep their own usage checks. The fleet itself is in test/e2e/mcollective.test.ts.
 */

const APPLICATION = join(REPO, 'integrations/mcollective/application/localpuppet.rb')

/** Runs `script` with `app`, an allocated application: its exit code and output. */
async function ruby(script: string, env: Record<string, string> = {}): Promise<{exitCode: number | undefined; stdout: string; stderr: string}> {
  const program = `
    require 'mcollective'
    require 'json'
    require ${JSON.stringify(APPLICATION)}
    app = MCollective::Application::Localpuppet.allocate
    ${script}
  `
  const result = await execa('ruby', ['-e', program], {reject: false, env})
  if (![0, 1, 64].includes(result.exitCode ?? -1)) throw new Error(result.stderr)
  return {exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr}
}

test('apply and status hand the whole command line to localpuppet rollout / fleet status, the older flags translated', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'localpuppet-front-'))
  t.teardown(() => rm(dir, {recursive: true, force: true}))
  // A localpuppet that prints what it was given.
  const fake = join(dir, 'localpuppet')
  await writeFile(fake, '#!/bin/sh\nprintf "%s\\n" "$@"\nexit 1\n')
  await chmod(fake, 0o755)
  const run = (argv: string[]) =>
    ruby(
      `
      ARGV.replace(${JSON.stringify(argv)})
      app.application_parse_options
      app.main
    `,
      {LOCALPUPPET_BIN: fake},
    )

  const apply = await run(['apply', 'foo/tags/1.5.0', '--fetch', '--canary', '1', '--batch', '2', '--batch-sleep', '2.5', '--continue-on-failure', '-W', 'role=web', '--timeout', '1800', '-t', '9', '--config', '/etc/mco/client.cfg', '--json'])
  t.is(apply.exitCode, 1, "localpuppet's exit code is the application's")
  t.deepEqual(apply.stdout.split('\n'), [
    'rollout',
    'foo/tags/1.5.0',
    '--fetch',
    '--canary',
    '1',
    '--batch',
    '2',
    '--soak',
    '3s',
    '--max-failures',
    '100%',
    '-W',
    'role=web',
    '--timeout',
    '1800',
    '-t',
    '9',
    '--mco-config',
    '/etc/mco/client.cfg',
    '--json',
  ])
  const status = await run(['status', '-c', '/etc/mco/client.cfg', '--nodes', 'fleet.txt'])
  t.deepEqual(status.stdout.split('\n'), ['fleet', 'status', '--mco-config', '/etc/mco/client.cfg', '--nodes', 'fleet.txt'])
  const resume = await run(['apply', '--resume', '20261125T120000.000Z-1a2b'])
  t.deepEqual(resume.stdout.split('\n'), ['rollout', '--resume', '20261125T120000.000Z-1a2b'])
})

test('usage errors of history and log exit 64 with one line', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [[], /give a command/],
    [['frobnicate'], /unknown command frobnicate/],
    [['history'], /history takes 1 argument/],
    [['log', 'a', 'b', 'c'], /log takes 1 or 2 argument/],
  ]
  for (const [argv, message] of cases) {
    const result = await ruby(`
      app.configuration[:command] = ${argv[0] ? JSON.stringify(argv[0]) : 'nil'}
      app.configuration[:arguments] = ${JSON.stringify(argv.slice(1))}
      app.validate_configuration(app.configuration)
    `)
    t.is(result.exitCode, 64, argv.join(' '))
    t.regex(result.stderr, message, argv.join(' '))
  }
})
