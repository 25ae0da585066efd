/** The YAML tag that marks a parameter's value secret in a node input: `password: !secret hunter2`. */
export const SECRET_TAG = '!secret'

/** Whether a document (YAML text) uses the secret tag anywhere a node of it could carry it. */
export function marksSecrets(document: Uint8Array | string): boolean {
  const text = typeof document === 'string' ? document : Buffer.from(document).toString('utf8')
  return /(?:^|[\s:[{,-])!secret(?=[\s,\]}]|$)/m.test(text)
}
