import {createServer} from 'node:http'

import test, {type ExecutionContext} from 'ava'

import {HttpTransport} from '../../../../src/lib/source/readers/http-reader.js'

/** A server that answers every file with its own request line, and keeps the requests. */
async function echoServer(t: ExecutionContext) {
  const requests: string[] = []
  const http = createServer((req, res) => {
    requests.push(req.url!)
    res.writeHead(200, {'content-type': 'text/plain'}).end(req.url)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => http.close(() => resolve())))
  return {url: `http://127.0.0.1:${(http.address() as {port: number}).port}`, requests}
}

test("a source URL's query (a server's access token) is sent with every file's request, and shown redacted", async (t) => {
  const {url, requests} = await echoServer(t)
  const transport = new HttpTransport(`${url}/repo?token=SECRET`, {attempts: 1})
  t.teardown(() => transport.close())
  t.is((await transport.read('index.json', 1024))?.toString(), '/repo/index.json?token=SECRET')
  t.is((await transport.read('inputs/web1/abc.yaml', 1024))?.toString(), '/repo/inputs/web1/abc.yaml?token=SECRET')
  t.deepEqual(requests, ['/repo/index.json?token=SECRET', '/repo/inputs/web1/abc.yaml?token=SECRET'])
  t.false(transport.label.includes('SECRET'))
  t.false(transport.locate('index.json').includes('SECRET'))
})

test('a source URL without a query, with or without its closing slash, reads the files beneath it', async (t) => {
  const {url} = await echoServer(t)
  for (const base of [`${url}/repo`, `${url}/repo/`]) {
    const transport = new HttpTransport(base, {attempts: 1})
    t.teardown(() => transport.close())
    t.is((await transport.read('index.json', 1024))?.toString(), '/repo/index.json')
  }
})
