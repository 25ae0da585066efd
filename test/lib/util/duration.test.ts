import test from 'ava'

import {formatAge, parseDuration} from '../../../src/lib/util/duration.js'

test('durations as people write them for timers', (t) => {
  t.is(parseDuration('90s', '--max-age'), 90_000)
  t.is(parseDuration('6h', '--max-age'), 6 * 3_600_000)
  t.is(parseDuration('1d', '--max-age'), 86_400_000)
  t.is(parseDuration('1h30m', '--max-age'), 5_400_000)
  t.is(parseDuration('120', '--max-age'), 120_000)
  for (const bad of ['', '0', '0s', 'soon', '6 h', '-1h', '1.5h']) t.throws(() => parseDuration(bad, '--max-age'), {message: /^--max-age /}, bad)
})

test('ages print to the two largest units', (t) => {
  t.is(formatAge(45_000), '45s')
  t.is(formatAge(12 * 60_000), '12m')
  t.is(formatAge(6 * 3_600_000), '6h')
  t.is(formatAge(2 * 3_600_000 + 5 * 60_000), '2h05m')
  t.is(formatAge(3 * 86_400_000 + 4 * 3_600_000), '3d4h')
})
