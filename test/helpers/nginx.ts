import {spawn} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {type StartedServer, freePort, portOpen} from './net.js'

export {freePort}

export const NGINX = '/usr/sbin/nginx'

export type Nginx = StartedServer

/**
 * Debian's nginx serving `root` on 127.0.0.1 with a generated configuration, all its
 * files under `work`; stopped by its PID. `accessLog`: a file that gets one line per
 * request (`<body bytes> <status> <uri>`); `requestLog`: one line per request in
 * `<work>/access.log`, `METHOD PATH STATUS BYTES_SENT` (headers and body, as sent);
 * `gzip`: JSON compressed for a client that asks.
 */
export async function startNginx(root: string, work: string, options: {accessLog?: string; requestLog?: boolean; gzip?: boolean} = {}): Promise<Nginx> {
  await mkdir(work, {recursive: true})
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const temp = (name: string) => `${name}_temp_path ${join(work, name)};`
    const config = join(work, 'nginx.conf')
    await writeFile(
      config,
      [
        'daemon off;',
        'master_process off;',
        'worker_processes 1;',
        `pid ${join(work, 'nginx.pid')};`,
        `error_log ${join(work, 'error.log')} warn;`,
        'events { worker_connections 256; }',
        'http {',
        // The bench counts the bytes each tool downloaded: one line per request, the body's bytes first.
        ...(options.accessLog
          ? [`  log_format bytes '$body_bytes_sent $status $request_uri'; access_log ${options.accessLog} bytes;`]
          : options.requestLog
            ? ["  log_format bytes '$request_method $uri $status $bytes_sent';", `  access_log ${join(work, 'access.log')} bytes;`]
            : ['  access_log off;']),
        ...(options.gzip ? ['  gzip on;', '  gzip_types application/json;', '  gzip_min_length 256;'] : []),
        `  ${temp('client_body')} ${temp('proxy')} ${temp('fastcgi')} ${temp('uwsgi')} ${temp('scgi')}`,
        '  types { application/json json; application/gzip gz; }',
        '  default_type application/octet-stream;',
        '  sendfile on;',
        `  server { listen 127.0.0.1:${port}; root ${root}; }`,
        '}',
        '',
      ].join('\n'),
    )
    const child = spawn(NGINX, ['-c', config, '-p', work, '-e', join(work, 'error.log')], {stdio: 'ignore'})
    let exited = false
    child.on('exit', () => {
      exited = true
    })
    const stop = async () => {
      if (exited) return
      const gone = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await Promise.race([gone, sleep(10_000)])
      if (!exited) child.kill('SIGKILL')
    }

    for (let i = 0; i < 200 && !exited; i++) {
      if (await portOpen(port)) return {url: `http://127.0.0.1:${port}`, port, pid: child.pid!, stop}
      await sleep(50)
    }

    await stop()
    if (attempt >= 2) throw new Error(`nginx did not start on 127.0.0.1:${port} (see ${join(work, 'error.log')})`)
  }
}

