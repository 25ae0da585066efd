import {isSecretMarker} from '../util/secret.js'
import {isMapping} from '../util/json.js'
import {secretRunFiles} from './hiera-secrets.js'
import {restoreSecrets} from './secret-values.js'

/**
 * --replay and rollback: a recorded input whose secrets are redacted markers gets them
 * back from the replayed run's `secrets.age` (opened with the node's key: 78 when it is
 * missing, 65 when the file was encrypted to another key or changed). An input with no
 * secret is returned as it is, nothing opened.
 */
export async function replaySecrets<T extends {classes?: unknown; raw: Record<string, unknown>}>(input: T, runDir: string, stateDir: string, label: string): Promise<T> {
  const marked = isMapping(input.classes) && Object.values(input.classes).some((params) => isMapping(params) && Object.values(params).some((value) => isSecretMarker(value)))
  if (!marked) return input
  const {openRunSecrets} = await import('./hiera-secrets.js')
  const kept = await openRunSecrets(secretRunFiles(runDir).sealed, stateDir)
  const {secretDigestKey} = await import('./secret-digest.js')
  const restored = restoreSecrets({classes: input.classes}, kept, label, await secretDigestKey(stateDir))
  return {...input, classes: restored.classes, raw: {...input.raw, classes: restored.classes}}
}
