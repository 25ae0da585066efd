import {join} from 'node:path'

import test from 'ava'
import {execa} from 'execa'

import {REPO} from '../helpers/cli.js'

/*
 * The `mco localpuppet` application's planning and rendering, on an application object
 * that never connects (no broker needed): which nodes go in which batch, and what the
 * final table and exit code say. The fleet itself is in test/e2e/mcollective.test.ts.
 */

const APPLICATION = join(REPO, 'integrations/mcollective/application/localpuppet.rb')

/** Runs `script` with `app`, an allocated application: its exit code and output. */
async function ruby(script: string): Promise<{exitCode: number | undefined; stdout: string; stderr: string}> {
  const program = `
    require 'mcollective'
    require 'json'
    require ${JSON.stringify(APPLICATION)}
    app = MCollective::Application::Localpuppet.allocate
    ${script}
  `
  const result = await execa('ruby', ['-e', program], {reject: false})
  // 1 and 64 are the application's own exit codes; anything else is a broken script.
  if (![0, 1, 64].includes(result.exitCode ?? -1)) throw new Error(result.stderr)
  return {exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr}
}

const groups = async (options: Record<string, number>, count: number) =>
  JSON.parse(
    (
      await ruby(`
    ${Object.entries(options)
      .map(([key, value]) => `app.configuration[:${key}] = ${value}`)
      .join('\n')}
    nodes = (1..${count}).map { |i| "n#{i}" }
    groups = app.send(:rollout_groups, nodes)
    puts JSON.generate(groups.each_index.map { |i| [app.send(:group_label, groups, i), groups[i]] })
  `)
    ).stdout,
  )

test('canaries go first and alone, then batches of --batch; without --batch the rest go at once', async (t) => {
  t.deepEqual(await groups({batch: 2}, 5), [
    ['batch 1 of 3', ['n1', 'n2']],
    ['batch 2 of 3', ['n3', 'n4']],
    ['batch 3 of 3', ['n5']],
  ])
  t.deepEqual(await groups({canary: 1, batch: 2}, 4), [
    ['the canaries', ['n1']],
    ['batch 1 of 2', ['n2', 'n3']],
    ['batch 2 of 2', ['n4']],
  ])
  t.deepEqual(await groups({canary: 2}, 5), [
    ['the canaries', ['n1', 'n2']],
    ['the one batch', ['n3', 'n4', 'n5']],
  ])
  t.deepEqual(await groups({}, 3), [['the one batch', ['n1', 'n2', 'n3']]])
  t.deepEqual(await groups({canary: 5}, 3), [['the canaries', ['n1', 'n2', 'n3']]])
})

test('the final table has one line per node, a summary, and exits 1 naming every node that did not succeed', async (t) => {
  const result = await ruby(`
    app.instance_variable_set(:@rows, {
      'db1' => {node: 'db1', state: 'succeeded', release: 'foo/tags/1.3.0', changed: 3, failed: 0, out_of_sync: 0, duration_ms: 4100},
      'web1' => {node: 'web1', state: 'refused', exit_code: 73, message: "puppet is disabled: upgrade\\nmore"},
      'web2' => {node: 'web2', state: 'no answer', message: 'stopped answering while run X was running'},
      'web3' => {node: 'web3', state: 'not started'},
    })
    app.send(:report_apply, 'foo/tags/1.3.0', 'stopped after batch 2 of 3: web1 refused', 12.34)
  `)
  t.is(result.exitCode, 1)
  t.is(
    result.stdout,
    [
      'NODE  STATE        RELEASE         CHANGED  FAILED  OUT_OF_SYNC  DURATION  MESSAGE',
      'db1   succeeded    foo/tags/1.3.0  3        0       0            4.1s',
      'web1  refused      -               -        -       -            -         exit 73: puppet is disabled: upgrade',
      'web2  no answer    -               -        -       -            -         stopped answering while run X was running',
      'web3  not started  -               -        -       -            -',
      '',
      '4 nodes: 1 succeeded, 1 refused, 1 no answer, 1 not started (12.3 s)',
      'Stopped after batch 2 of 3: web1 refused',
      'Not succeeded: web1 (refused), web2 (no answer), web3 (not started)',
    ].join('\n'),
  )

  const good = await ruby(`
    app.instance_variable_set(:@rows, {'db1' => {node: 'db1', state: 'succeeded'}, 'db2' => {node: 'db2', state: 'skipped'}})
    app.configuration[:json] = true
    app.send(:report_apply, nil, nil, 1)
  `)
  t.is(good.exitCode, 0)
  t.like(JSON.parse(good.stdout), {ok: true, not_succeeded: [], summary: {total: 2, by_state: {succeeded: 1, skipped: 1}}})
})

test('usage errors exit 64 with one line', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [[], /give a command/],
    [['frobnicate'], /unknown command frobnicate/],
    [['history'], /history takes 1 argument/],
    [['apply', 'a', 'b'], /apply takes 0 or 1 argument/],
    [['apply', '--save'], /--save needs a REF/],
  ]
  for (const [argv, message] of cases) {
    const result = await ruby(`
      app.configuration[:command] = ${argv[0] ? JSON.stringify(argv[0]) : 'nil'}
      app.configuration[:arguments] = ${JSON.stringify(argv.slice(1).filter((arg) => !arg.startsWith('--')))}
      app.configuration[:save] = ${argv.includes('--save')}
      app.validate_configuration(app.configuration)
    `)
    t.is(result.exitCode, 64, argv.join(' '))
    t.regex(result.stderr, message, argv.join(' '))
  }
})
