import test from 'ava'

import {type RunStamp, catalogCommand, factsCommand, reportCommand, runUuid} from '../../../src/lib/puppetdb/wire.js'

const stamp: RunStamp = {
  certname: 'web1',
  codeId: 'foo/tags/1.6.0@sha256:aa',
  runId: '20261128T001500Z-ab12',
  release: 'foo/tags/1.6.0',
  ref: 'foo/channels/stable',
  inputDigest: 'sha256:bb',
  puppet: {implementation: 'puppet', version: '7.23.0'},
  state: 'succeeded',
  noop: false,
  environment: 'production',
  startedAt: '2026-11-28T00:15:00.000Z',
  finishedAt: '2026-11-28T00:15:09.000Z',
  error: null,
  firstError: null,
  producedAt: '2026-11-28T00:15:10.000Z',
}

test("a report from Puppet's keeps its uuids, gets the release as code_id and the run id as job_id, and only resources that did something", (t) => {
  const {payload, version, command} = reportCommand(
    {
      host: 'vm',
      time: '2026-11-28T00:15:01.5+00:00',
      transaction_uuid: 't-1',
      catalog_uuid: 'c-1',
      status: 'changed',
      metrics: {time: {name: 'time', values: [['total', 'Total', 2.5]]}},
      resource_statuses: {
        'File[/x]': {title: '/x', resource_type: 'File', events: [{status: 'success', property: 'ensure', previous_value: 'absent', desired_value: 'file', message: 'defined'}], containment_path: ['Stage[main]']},
        'Notify[quiet]': {title: 'quiet', resource_type: 'Notify', events: []},
      },
      logs: [{level: 'notice', message: 'hi', source: 'Puppet', tags: ['notice'], time: '2026-11-28T00:15:02Z'}],
    },
    stamp,
  )
  t.is(command, 'store report')
  t.is(version, 8)
  t.like(payload, {certname: 'web1', code_id: stamp.codeId, job_id: stamp.runId, transaction_uuid: 't-1', catalog_uuid: 'c-1', status: 'changed', start_time: '2026-11-28T00:15:01.500Z', end_time: '2026-11-28T00:15:04.000Z'})
  t.deepEqual((payload.resources as Array<{resource_title: string}>).map((resource) => resource.resource_title), ['/x'])
})

test("localpuppet's drift is in the report where an agent's has Puppet's (puppet apply computes none): the resources metric corrective_change, the report's flag and each corrected resource's", (t) => {
  const puppetReport = {
    status: 'changed',
    corrective_change: false,
    metrics: {resources: {name: 'resources', values: [['changed', 'Changed', 2], ['corrective_change', 'Corrective change', 0]]}},
    resource_statuses: {
      'File[/etc/motd]': {title: '/etc/motd', resource_type: 'File', events: [{status: 'success', property: 'content'}]},
      'Notify[hello]': {title: 'hello', resource_type: 'Notify', events: [{status: 'success', property: 'message'}]},
    },
  }
  const {payload} = reportCommand(puppetReport, {...stamp, correctiveChange: 1, corrected: ['File[/etc/motd]']})
  const corrective = (report: Record<string, unknown>) => (report.metrics as Array<{category: string; name: string; value: number}>).filter((metric) => metric.name === 'corrective_change')
  t.deepEqual(corrective(payload), [{category: 'resources', name: 'corrective_change', value: 1}])
  t.true(payload.corrective_change)
  t.deepEqual((payload.resources as Array<{resource_title: string; corrective_change: boolean | null}>).map((resource) => [resource.resource_title, resource.corrective_change]), [['/etc/motd', true], ['hello', false]])
  // No drift: the flag is false and the count 0; a noop run's is not known (Prometheus has none either).
  t.deepEqual(corrective(reportCommand(puppetReport, {...stamp, correctiveChange: 0}).payload), [{category: 'resources', name: 'corrective_change', value: 0}])
  t.false(reportCommand(puppetReport, {...stamp, correctiveChange: 0}).payload.corrective_change)
  t.deepEqual(corrective(reportCommand(puppetReport, {...stamp, noop: true, correctiveChange: 3}).payload), [{category: 'resources', name: 'corrective_change', value: 0}])
})

test("a run localpuppet judged failed is failed in PuppetDB, and one without Puppet's report carries Puppet's first error", (t) => {
  t.is(reportCommand({status: 'changed'}, {...stamp, state: 'failed'}).payload.status, 'failed')
  const {payload} = reportCommand(null, {...stamp, state: 'failed', error: 'puppet run failed (exit 1)', firstError: 'Error: Evaluation Error: Unknown variable: $nope'})
  t.like(payload, {status: 'failed', transaction_uuid: runUuid(stamp.runId, 'transaction'), resources: []})
  t.deepEqual((payload.logs as Array<{level: string; message: string}>).map((log) => [log.level, log.message]), [['err', 'Evaluation Error: Unknown variable: $nope']])
})

test('facts carry the localpuppet fact; a catalog loses its sensitive parameters and gets its edges', (t) => {
  const facts = factsCommand({name: 'vm', values: {os: {family: 'Debian'}}}, stamp).payload as {values: Record<string, unknown>}
  t.like(facts.values, {os: {family: 'Debian'}, localpuppet: {release: 'foo/tags/1.6.0', run_id: stamp.runId, input_digest: 'sha256:bb', puppet_version: '7.23.0'}})
  const catalog = catalogCommand(
    {
      name: 'vm',
      version: 17,
      resources: [
        {type: 'Class', title: 'main', tags: ['class'], kind: 'unknown'},
        {type: 'User', title: 'bob', tags: ['user'], parameters: {password: 'secret', shell: '/bin/sh', require: 'Class[main]'}, sensitive_parameters: ['password']},
      ],
      edges: [{source: 'Class[main]', target: 'User[bob]'}, {source: 'Class[gone]', target: 'User[bob]'}],
    },
    stamp,
    't-1',
  ).payload as {resources: Array<Record<string, unknown>>; edges: unknown[]; version: string; certname: string}
  t.is(catalog.certname, 'web1')
  t.is(catalog.version, '17')
  t.deepEqual(catalog.resources[1].parameters, {shell: '/bin/sh', require: 'Class[main]'})
  t.false('kind' in catalog.resources[0])
  t.deepEqual(catalog.edges, [
    {source: {type: 'Class', title: 'main'}, target: {type: 'User', title: 'bob'}, relationship: 'contains'},
    {source: {type: 'Class', title: 'main'}, target: {type: 'User', title: 'bob'}, relationship: 'required-by'},
  ])
})

test('a Sensitive value inside a parameter (a hash or list holding one: Puppet marks only a parameter whose whole value is Sensitive) never reaches PuppetDB in clear', (t) => {
  const sensitive = (value: unknown) => ({__ptype: 'Sensitive', __pvalue: value})
  const catalog = catalogCommand(
    {
      name: 'vm',
      version: 1,
      resources: [{type: 'Class', title: 'Db', tags: ['class'], parameters: {config: {user: 'app', password: sensitive('hunter2')}, keys: ['a', sensitive({deep: 'sekrit'})]}}],
      edges: [],
    },
    stamp,
    null,
  )
  const text = JSON.stringify(catalog)
  t.false(text.includes('hunter2'))
  t.false(text.includes('sekrit'))
  const parameters = (catalog.payload as {resources: Array<{parameters: Record<string, unknown>}>}).resources[0].parameters
  t.deepEqual(parameters, {config: {user: 'app', password: 'Sensitive [value redacted]'}, keys: ['a', 'Sensitive [value redacted]']})
})
