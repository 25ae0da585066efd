import test from 'ava'
import fc from 'fast-check'

import {compareNatural} from '../../../src/lib/util/natural-order.js'

test('node names sort with their numbers by value: db1, db2, db10 (not db1, db10, db2)', (t) => {
  t.deepEqual(['db10', 'web1', 'db2', 'db1', 'db9', 'web10', 'web2'].sort(compareNatural), ['db1', 'db2', 'db9', 'db10', 'web1', 'web2', 'web10'])
  t.deepEqual(['n00002', 'n00010', 'n00001'].sort(compareNatural), ['n00001', 'n00002', 'n00010'], 'zero-padded names keep their order')
  t.deepEqual(['rack2-node10', 'rack2-node9', 'rack10-node1', 'rack1-node1'].sort(compareNatural), ['rack1-node1', 'rack2-node9', 'rack2-node10', 'rack10-node1'])
  t.deepEqual(['db1', 'db01', 'db001'].sort(compareNatural), ['db001', 'db01', 'db1'], 'equal numbers are told apart by the text')
  t.deepEqual(['b', 'a', 'a.b', 'a-b'].sort(compareNatural), ['a', 'a-b', 'a.b', 'b'], 'names without digits: plain order')
})

const name = fc.array(fc.constantFrom('a', 'b', '-', '.', '0', '1', '2', '9', '10', '007'), {maxLength: 6}).map((parts) => parts.join(''))

test('property: a total order (antisymmetric, transitive, 0 only for the same name): the sort is the same whatever order the names came in', (t) => {
  fc.assert(
    fc.property(name, name, name, (a, b, c) => {
      const ab = compareNatural(a, b)
      t.is(Math.sign(ab), -Math.sign(compareNatural(b, a)) || 0)
      t.is(ab === 0, a === b)
      if (ab <= 0 && compareNatural(b, c) <= 0) t.true(compareNatural(a, c) <= 0, `${a} <= ${b} <= ${c}`)
    }),
    {numRuns: 2000},
  )
  fc.assert(
    fc.property(fc.array(name, {maxLength: 20}), (names) => {
      const sorted = [...names].sort(compareNatural)
      t.deepEqual([...names].reverse().sort(compareNatural), sorted)
    }),
  )
})
