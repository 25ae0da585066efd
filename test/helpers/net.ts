import {createConnection, createServer} from 'node:net'

/** A server a test started on 127.0.0.1, stopped by its PID. */
export interface StartedServer {
  url: string
  port: number
  pid: number
  stop(): Promise<void>
}

/** A free TCP port on 127.0.0.1, picked at run time. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as {port: number}
      server.close(() => resolve(port))
    })
  })
}

/** True once something accepts connections on 127.0.0.1:port. */
export async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({host: '127.0.0.1', port})
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}
