import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'

import test from 'ava'

import {readChangedResources} from '../../../src/lib/puppet/run-report.js'
import {FIXTURES} from '../../helpers/cli.js'
import {tempDir} from '../../helpers/temp.js'

// A real Puppet 7.23 report: a file changed, a notify, a guarded exec, a refreshonly exec triggered by the file, an exec that failed.
const REPORT = join(FIXTURES, 'puppet-report', 'last_run_report.yaml')

test("the resources a run changed on the system, from Puppet's report with its Ruby tags: not a notify, a refresh or a failure", async (t) => {
  t.deepEqual(await readChangedResources(REPORT), ['File[/srv/example/f]'])
})

test('no report, or one that is not a report, is unknown (null), never an empty change list', async (t) => {
  const dir = await tempDir(t)
  t.is(await readChangedResources(join(dir, 'missing.yaml')), null)
  await writeFile(join(dir, 'bad.yaml'), '--- !ruby/object:Puppet::Transaction::Report\nresource_statuses: [\n')
  t.is(await readChangedResources(join(dir, 'bad.yaml')), null)
  await writeFile(join(dir, 'list.yaml'), 'resource_statuses: [a, b]\n')
  t.is(await readChangedResources(join(dir, 'list.yaml')), null)
})
