import {type Socket, createServer} from 'node:net'

/**
 * A malicious HTTP server on 127.0.0.1 that speaks raw TCP, so it can do what a well-behaved
 * server library refuses to: lie in Content-Length, drip headers or a body a byte at a time,
 * never end. `answer` gets the request's path and the socket, and writes whatever it likes.
 */
export interface HostileServer {
  url: string
  port: number
  /** Paths requested, in order. */
  requests: string[]
  close(): Promise<void>
}

export type HostileAnswer = (path: string, socket: Socket) => void | Promise<void>

export async function hostileServer(answer: HostileAnswer): Promise<HostileServer> {
  const requests: string[] = []
  const sockets = new Set<Socket>()
  const timers = new Set<NodeJS.Timeout>()
  const server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      const path = new URL(head.split(' ')[1] ?? '/', 'http://localhost').pathname
      requests.push(path)
      void answer(path, socket)
    }

    socket.on('data', onData)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as {port: number}
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    async close() {
      for (const timer of timers) clearInterval(timer)
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

/** Writes `bytes` one byte every `everyMs` until done or the client goes away; then `end` decides whether to close. */
export function drip(socket: Socket, bytes: Buffer, everyMs: number, end = true): void {
  let at = 0
  const timer = setInterval(() => {
    if (socket.destroyed || at >= bytes.length) {
      clearInterval(timer)
      if (end && !socket.destroyed) socket.end()
      return
    }

    socket.write(bytes.subarray(at, at + 1))
    at++
  }, everyMs)
  socket.on('close', () => clearInterval(timer))
}

/** A status line and headers, as bytes. */
export function head(status: number, headers: Record<string, string | number> = {}): Buffer {
  const lines = [`HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'X'}`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), 'Connection: close']
  return Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1')
}

/** Writes `chunk` (64 KiB of zeros by default) again and again, as fast as the client reads, until it goes away: an endless body. */
export function pour(socket: Socket, chunk = Buffer.alloc(64 * 1024)): void {
  const pump = () => {
    while (!socket.destroyed && socket.write(chunk));
    if (!socket.destroyed) socket.once('drain', pump)
  }

  pump()
}
