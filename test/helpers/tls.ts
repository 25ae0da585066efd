import {execFile} from 'node:child_process'
import {join} from 'node:path'
import {promisify} from 'node:util'

/** A self-signed certificate for 127.0.0.1 (one day), made by openssl in `dir`: `key.pem` and `cert.pem`. */
export async function selfSignedCertificate(dir: string): Promise<{key: string; cert: string}> {
  const key = join(dir, 'key.pem')
  const cert = join(dir, 'cert.pem')
  await promisify(execFile)('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'])
  return {key, cert}
}
