import type {ExecutionContext} from 'ava'
import test from 'ava'

import {FleetUnavailableError, UsageError} from '../../../src/lib/errors.js'
import {MAX_SERIES_CHARS, PrometheusClient, type PromSample} from '../../../src/lib/prometheus/client.js'
import {head, hostileServer} from '../../helpers/hostile-server.js'
import {testServer} from '../../helpers/repository.js'

/*
 * The Prometheus client against answers no Prometheus gives: each is 69 (FleetUnavailableError)
 * naming the query, the series and the value, never a crash (70) or a verdict made of it.
 */

const NOW = 1_764_000_000

/** A stand-in for Prometheus that answers every query with `body` (text, as given); records each request's Authorization. */
async function answering(t: ExecutionContext, body: string, status = 200) {
  const authorizations: Array<string | undefined> = []
  const server = await testServer('/nonexistent', async (req, res) => {
    for await (const _ of req);
    authorizations.push(req.headers.authorization)
    res.writeHead(status, {'content-type': 'application/json'})
    res.end(body)
    return true
  })
  t.teardown(() => server.close())
  return {url: server.url, port: server.port, authorizations}
}

/** A server that sends its header, then a space every `everyMs`, forever. */
async function dripping(t: ExecutionContext, everyMs: number) {
  const server = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json'}))
    const timer = setInterval(() => socket.write(' '), everyMs)
    socket.on('close', () => clearInterval(timer))
  })
  t.teardown(() => server.close())
  return server
}

const vector = (result: unknown[]) => JSON.stringify({status: 'success', data: {resultType: 'vector', result}})
const series = (value: unknown, metric: unknown = {__name__: 'localpuppet_last_attempt_timestamp_seconds', instance: 'web1:9100', node: 'web1'}) => ({metric, value})

async function read(url: string, options = {}): Promise<PromSample[]> {
  const samples: PromSample[] = []
  await new PrometheusClient(url, options).query('up', (sample) => {
    samples.push(sample)
  })
  return samples
}

test('a series as Prometheus writes it is read, NaN and infinities included', async (t) => {
  const prometheus = await answering(t, vector([series([NOW, '1764000000.5']), series([NOW, 'NaN']), series([NOW, '-Inf'])]))
  const samples = await read(prometheus.url)
  t.deepEqual(
    samples.map((sample) => [sample.at, sample.value]),
    [
      [NOW * 1000, 1_764_000_000.5],
      [NOW * 1000, Number.NaN],
      [NOW * 1000, Number.NEGATIVE_INFINITY],
    ],
  )
})

for (const [what, entry, message] of [
  ['a time of NaN', series(['NaN', '1']), 'series localpuppet_last_attempt_timestamp_seconds{node="web1", instance="web1:9100"}: sample ["NaN","1"]: its time is not a time'],
  ['a time of "abc"', series(['abc', '1']), 'sample ["abc","1"]: its time is not a time'],
  ['a time of 1e20', series([1e20, '1']), 'sample [100000000000000000000,"1"]: its time is not a time'],
  ['a value of "abc"', series([NOW, 'abc']), `sample [${NOW},"abc"]: its value is not a number`],
  ['a value that is a number, not a string', series([NOW, 1]), `sample [${NOW},1]: its value is not a number`],
  ['no value', {metric: {__name__: 'x'}}, 'series x{}: sample undefined: its time is not a time'],
  ['a series that is a number', 7, 'a series that is not an object: 7'],
  ['labels that are an array', series([NOW, '1'], ['a']), 'a series without its labels'],
  ['a label that is a number', series([NOW, '1'], {__name__: 'x', node: 5}), 'series x{}: label node is 5, not a string'],
] as const) {
  test(`${what} in an answer is 69 naming the query, the series and the value`, async (t) => {
    const prometheus = await answering(t, vector([series([NOW, '1']), entry]))
    const error = await t.throwsAsync(read(prometheus.url), {instanceOf: FleetUnavailableError})
    t.true(error!.message.startsWith(`prometheus ${prometheus.url}: query up: `), error!.message)
    t.true(error!.message.includes(message), error!.message)
  })
}

test('a value its reader refuses is 69 naming the series and the value as written', async (t) => {
  const prometheus = await answering(t, vector([series([NOW, '1e20'])]))
  const client = new PrometheusClient(prometheus.url)
  const error = await t.throwsAsync(client.query('up', (sample) => (sample.value > 1e12 ? 'is not a time' : undefined)), {instanceOf: FleetUnavailableError})
  t.is(error!.message, `prometheus ${prometheus.url}: query up: series localpuppet_last_attempt_timestamp_seconds{node="web1", instance="web1:9100"}: value "1e20" is not a time`)
})

test("an answer that is not the API's, or of the wrong type, is 69", async (t) => {
  for (const [body, message] of [
    ['<html>', "not Prometheus' API"],
    [JSON.stringify({status: 'success', data: {resultType: 'matrix', result: []}}), 'expected an instant vector, got matrix'],
    [JSON.stringify({status: 'success', data: {resultType: 'vector', result: {}}}), "not Prometheus' API"],
    [JSON.stringify({status: 'success', data: {resultType: 'vector'}}), 'expected an instant vector, got vector'],
    [JSON.stringify({status: 'success', data: {resultType: 'vector', result: []}}) + 'x', "not Prometheus' API"],
  ] as const) {
    const prometheus = await answering(t, body)
    const error = await t.throwsAsync(read(prometheus.url), {instanceOf: FleetUnavailableError})
    t.true(error!.message.includes(message), error!.message)
  }

  // The keys in another order than Prometheus writes them are still its API.
  const reordered = await answering(t, JSON.stringify({data: {result: [series([NOW, '2'])], resultType: 'vector'}, status: 'success'}))
  t.is((await read(reordered.url))[0].value, 2)
})

test("Prometheus' error text is shown escaped: an escape sequence or a newline cannot reach the terminal", async (t) => {
  const prometheus = await answering(t, JSON.stringify({status: 'error', errorType: 'bad\u001b]0;owned\u0007', error: 'x\nfoo/channels/stable: 1.3.0 -> 1.4.0\u001b[2J'}), 400)
  const error = await t.throwsAsync(read(prometheus.url), {instanceOf: FleetUnavailableError})
  t.is(error!.message, `prometheus ${prometheus.url}: HTTP 400: bad\\e]0;owned\\u0007: x\\nfoo/channels/stable: 1.3.0 -> 1.4.0\\e[2J (query up)`)
})

test('credentials in the URL authenticate the request and are never shown', async (t) => {
  const prometheus = await answering(t, JSON.stringify({status: 'error', errorType: 'unauthorized', error: 'no'}), 401)
  const url = prometheus.url.replace('http://', 'http://ops:s3cr%40t@')
  const client = new PrometheusClient(url)
  t.is(client.url, `${prometheus.url}/`)
  const error = await t.throwsAsync(read(url), {instanceOf: FleetUnavailableError})
  t.false(error!.message.includes('s3cr'), error!.message)
  t.false(error!.message.includes('ops'), error!.message)
  t.deepEqual(prometheus.authorizations, [`Basic ${Buffer.from('ops:s3cr@t').toString('base64')}`])

  // Not a URL at all: the message drops what looks like credentials too.
  t.throws(() => new PrometheusClient('ftp://ops:s3cret@host'), {message: /^--prometheus ftp:\/\/host\/?: http:\/\/ or https:\/\/ only$/})
  t.throws(() => new PrometheusClient('http://ops:s3/cret@host:9090'), {instanceOf: UsageError, message: '--prometheus "http://host:9090": not a URL (http://host:9090)'})
})

test('a server that sends its header, then a byte a second, is cut at the deadline (69), not waited on', async (t) => {
  const server = await dripping(t, 1000)
  const error = await t.throwsAsync(read(server.url, {deadlineMs: 1500}), {instanceOf: FleetUnavailableError})
  t.is(error!.message, `prometheus ${server.url}: query up: no whole answer within 1.5 s (--prometheus-timeout)`)
})

test('a body slower than the rate floor over a window is cut (69)', async (t) => {
  const server = await dripping(t, 100)
  const error = await t.throwsAsync(read(server.url, {timeoutMs: 1000}), {instanceOf: FleetUnavailableError})
  t.regex(error!.message, /: query up: the answer: too slow: \d+ bytes in 1 s/)
})

test('more series than the bound, or one series larger than any, is 69 naming the query', async (t) => {
  const many = await answering(t, vector(Array.from({length: 50}, () => series([NOW, '1']))))
  const error = await t.throwsAsync(read(many.url, {maxSeries: 20}), {instanceOf: FleetUnavailableError})
  t.is(error!.message, `prometheus ${many.url}: query up: more than 20 series in the answer`)

  const huge = await answering(t, vector([series([NOW, '1'], {__name__: 'x', node: 'n'.repeat(MAX_SERIES_CHARS + 10)})]))
  const large = await t.throwsAsync(read(huge.url), {instanceOf: FleetUnavailableError})
  t.true(large!.message.endsWith(`: query up: one series (or the error text) of more than ${MAX_SERIES_CHARS} characters`), large!.message)

  const bytes = await answering(t, vector(Array.from({length: 50}, () => series([NOW, '1']))))
  const longer = await t.throwsAsync(read(bytes.url, {maxBytes: 1000}), {instanceOf: FleetUnavailableError})
  t.true(longer!.message.endsWith(': query up: answer larger than 1000 bytes'), longer!.message)
})

test('a user or password in the URL with a stray % (not %XX) is 64 naming the URL without them, never a crash (70)', (t) => {
  for (const url of ['http://ops:s3cr%zzt@127.0.0.1:9090', 'http://o%ps:s3cret@127.0.0.1:9090']) {
    const error = t.throws(() => new PrometheusClient(url), {instanceOf: UsageError})
    t.is(error!.message, '--prometheus http://127.0.0.1:9090/: its user or password is not percent-encoded (a % must start %XX: write % as %25)')
    t.is(error!.exitCode, 64)
  }
})

test('an answer nested 200,000 arrays deep (which JSON.parse reads, and JSON.stringify or String() cannot show) is 69 naming where, never a crash (70)', async (t) => {
  const deep = '['.repeat(200_000) + ']'.repeat(200_000)
  const good = `"metric":{"__name__":"x"},"value":[${NOW},"1"]`
  for (const [body, message] of [
    [`{"status":"error","errorType":"bad_data","error":${deep}}`, 'HTTP 200: bad_data: (nested too deep to show) (query up)'],
    [`{"status":"error","errorType":${deep},"error":"no"}`, 'HTTP 200: (nested too deep to show): no (query up)'],
    [`{"status":"success","data":{"resultType":"vector","result":[${deep}]}}`, 'query up: a series that is not an object: (nested too deep to show)'],
    [`{"status":"success","data":{"resultType":"vector","result":[{"metric":${deep},"value":[${NOW},"1"]}]}}`, 'query up: a series without its labels: (nested too deep to show)'],
    [`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"x","node":${deep}},"value":[${NOW},"1"]}]}}`, 'query up: series x{}: label node is (nested too deep to show), not a string'],
    [`{"status":"success","data":{"resultType":"vector","result":[{${good}},{"metric":{"__name__":"x"},"value":${deep}}]}}`, 'query up: series x{}: sample (nested too deep to show): its time is not a time'],
  ] as const) {
    const prometheus = await answering(t, body)
    const error = await t.throwsAsync(read(prometheus.url), {instanceOf: FleetUnavailableError})
    t.true(error!.message.startsWith(`prometheus ${prometheus.url}: ${message}`), error!.message)
  }
})

test('held (issue 33, round three): a gzip answer is not inflated, a redirect to another origin is not followed (its server never sees the credentials), a chunk declared as a terabyte is cut at the answer bound, duplicate keys and an error text of 50 MB are read in bounds', async (t) => {
  const {gzipSync} = await import('node:zlib')
  // gzip of 100 MB of spaces around a valid answer: 100 KB on the wire. The client asks for no encoding and inflates none.
  const bomb = gzipSync(Buffer.concat([Buffer.alloc(100 * 1024 * 1024, ' '), Buffer.from(vector([series([NOW, '1'])]))]))
  const gzipped = await hostileServer((_path, socket) => {
    socket.end(Buffer.concat([head(200, {'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': bomb.length}), bomb]))
  })
  t.teardown(() => gzipped.close())
  const inflated = await t.throwsAsync(read(gzipped.url), {instanceOf: FleetUnavailableError})
  t.regex(inflated!.message, /^prometheus http:\/\/127\.0\.0\.1:\d+: HTTP 200: not Prometheus' API \(no JSON answer at .*: an object was expected at "\\u001f/)
  t.false(inflated!.message.includes('\n'))

  const elsewhere = await answering(t, vector([series([NOW, '1'])]))
  const redirecting = await hostileServer((_path, socket) => {
    socket.end(head(307, {location: `${elsewhere.url}/api/v1/query`, 'content-length': 0}))
  })
  t.teardown(() => redirecting.close())
  const redirected = await t.throwsAsync(read(redirecting.url.replace('http://', 'http://ops:s3cret@')), {instanceOf: FleetUnavailableError})
  t.regex(redirected!.message, /: HTTP 307: not Prometheus' API/)
  t.false(redirected!.message.includes('s3cret'))
  t.deepEqual(elsewhere.authorizations, [], 'the other origin was never asked')

  const chunked = await hostileServer((_path, socket) => {
    socket.write(head(200, {'content-type': 'application/json', 'transfer-encoding': 'chunked'}))
    socket.write('E8D4A51000\r\n{"status":"success","data":{"resultType":"vector","result":[')
    const entry = Buffer.from(JSON.stringify(series([NOW, '1'])) + ',')
    const pump = () => {
      while (!socket.destroyed && socket.write(entry));
      if (!socket.destroyed) socket.once('drain', pump)
    }

    pump()
  })
  t.teardown(() => chunked.close())
  const cut = await t.throwsAsync(read(chunked.url, {maxBytes: 4 * 1024 * 1024}), {instanceOf: FleetUnavailableError})
  t.true(cut!.message.endsWith(': query up: answer larger than 4194304 bytes'), cut!.message)

  // Duplicate keys: the last status counts, as JSON.parse would have it; a repeated result is read as more series.
  const twice = await answering(t, `{"status":"error","data":{"resultType":"vector","result":[${JSON.stringify(series([NOW, '1']))}],"result":[${JSON.stringify(series([NOW, '2']))}]},"status":"success"}`)
  t.deepEqual((await read(twice.url)).map((sample) => sample.value), [1, 2])

  const long = await answering(t, JSON.stringify({status: 'error', errorType: 'execution', error: 'e'.repeat(50_000_000)}), 422)
  const huge = await t.throwsAsync(read(long.url), {instanceOf: FleetUnavailableError})
  t.true(huge!.message.endsWith(`: query up: one series (or the error text) of more than ${MAX_SERIES_CHARS} characters`), huge!.message)
})

test('a --prometheus-timeout longer than a timer can keep (30 days) is as good as none, not a deadline at once (69)', async (t) => {
  const prometheus = await answering(t, vector([series([NOW, '1'])]))
  t.is((await read(prometheus.url, {deadlineMs: 30 * 86_400_000, timeoutMs: 30 * 86_400_000})).length, 1)
})
