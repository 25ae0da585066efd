import test from 'ava'

import {FleetUnavailableError} from '../../../src/lib/errors.js'
import {assertMcoReachable, brokerOf} from '../../../src/lib/fleet/fleet-source.js'

test('the broker an mco client configuration names: its connector\'s first pool host and port (61613 by default); none when it names none', (t) => {
  t.deepEqual(brokerOf('connector = rabbitmq\nplugin.rabbitmq.pool.1.host = broker.example.com\nplugin.rabbitmq.pool.1.port = 6163\n'), {host: 'broker.example.com', port: 6163})
  t.deepEqual(brokerOf('connector=activemq\nplugin.activemq.pool.1.host=10.0.0.1\n'), {host: '10.0.0.1', port: 61613})
  t.is(brokerOf('connector = rabbitmq\nplugin.activemq.pool.1.host = other\n'), null)
  t.is(brokerOf('connector = rabbitmq\nplugin.rabbitmq.pool.1.host = b\nplugin.rabbitmq.pool.1.port = 99999\n'), null)
  t.is(brokerOf(''), null)
})

test('no mco on PATH is 69 naming both ways to the fleet, --prometheus first', async (t) => {
  const error = await t.throwsAsync(assertMcoReachable({mco: 'mco', env: {PATH: '/nonexistent'}}), {instanceOf: FleetUnavailableError})
  t.is(error!.exitCode, 69)
  t.is(error!.message, 'no fleet to read: no Prometheus is set, and MCollective cannot be used: mco is not installed (not on PATH)')
  t.regex(error!.suggestions[0], /^--prometheus URL reads the fleet from the node metrics/)
  t.regex(error!.suggestions[1], /^--via mco asks each node through MCollective/)
})
