import {createHash, randomBytes} from 'node:crypto'
import {gunzipSync, gzipSync} from 'node:zlib'

import test from 'ava'

import {SEGMENT_BYTES, SegmentedGzip, gzipMembers} from '../../../src/lib/archive/segmented-gzip.js'

/** What the archive format promises: one gzip member per segment, exactly gzip -6's bytes with mtime 0 and OS 255. */
function expectedMember(data: Buffer): Buffer {
  const member = gzipSync(data, {level: 6})
  member[9] = 255
  return member
}

const KINDS: Record<string, (size: number) => Buffer> = {
  'Puppet-like text': (size) => Buffer.from('class foo::config (\n  String $x = "y",\n) {\n  include bar\n}\n'.repeat(Math.ceil(size / 50)).slice(0, size), 'latin1'),
  'random bytes (output larger than its chunks)': (size) => randomBytes(size),
  zeros: (size) => Buffer.alloc(size),
}

for (const [kind, make] of Object.entries(KINDS)) {
  test(`${kind}: every member is the bytes a fresh gzip gives, in order, and the stream reads back`, async (t) => {
    const input = make(5 * SEGMENT_BYTES + 12_345)
    const out: Buffer[] = []
    const gzip = new SegmentedGzip((chunk) => {
      out.push(Buffer.from(chunk))
    }, 6)
    const expected: Buffer[] = []
    for (let offset = 0; offset < input.length; offset += SEGMENT_BYTES) {
      const buffer = gzip.take()
      const used = input.copy(buffer, 0, offset, offset + SEGMENT_BYTES)
      expected.push(expectedMember(input.subarray(offset, offset + used)))
      await gzip.write(buffer, used)
    }

    await gzip.end()
    const archive = Buffer.concat(out)
    t.true(archive.equals(Buffer.concat(expected)))
    t.is(createHash('sha256').update(gunzipSync(archive)).digest('hex'), createHash('sha256').update(input).digest('hex'))
  })
}

test('gzipMembers (for what pack holds in memory) makes the members SegmentedGzip makes of the same bytes', async (t) => {
  const data = KINDS['Puppet-like text'](SEGMENT_BYTES + 300_000)
  const out: Buffer[] = []
  const gzip = new SegmentedGzip((chunk) => {
    out.push(Buffer.from(chunk))
  }, 6)
  for (let offset = 0; offset < data.length; offset += SEGMENT_BYTES) {
    const buffer = gzip.take()
    await gzip.write(buffer, data.copy(buffer, 0, offset, offset + SEGMENT_BYTES))
  }

  await gzip.end()
  const members = await gzipMembers(data, 6)
  t.is(members.length, 2)
  t.true(Buffer.concat(out).equals(Buffer.concat(members)))
})

test('a member whose header straddles two output chunks still says OS 255 (the same bytes every run)', async (t) => {
  // One engine, so its 64 KiB output buffer is shared by consecutive members: a first
  // member of 65,531 compressed bytes leaves 5 bytes of it for the next member's header.
  let first: Buffer | undefined
  for (let n = 65_400; n < 65_536 && !first; n++) {
    const data = randomBytes(n)
    if (expectedMember(data).length === 65_531) first = data
  }

  t.truthy(first, 'no input compresses to 65,531 bytes')
  const second = KINDS['Puppet-like text'](100_000)
  const out: Buffer[] = []
  const gzip = new SegmentedGzip((chunk) => {
    out.push(Buffer.from(chunk))
  }, 6, 1)
  for (const data of [first!, second]) {
    const buffer = gzip.take()
    await gzip.write(buffer, data.copy(buffer))
  }

  await gzip.end()
  t.true(Buffer.concat(out).equals(Buffer.concat([expectedMember(first!), expectedMember(second)])))
})
