import {settingString} from './settings.js'

/** What the node knows of itself when its input comes from the repository (the node_name and input_from settings). */
export interface NodeIdentity {
  node: string
  /** repository: apply --fetch takes the node's input from the source's index. */
  inputFrom: 'file' | 'repository'
}

/** The node's name and where its input comes from: the settings (env, then the config file, then the host name). */
export async function nodeIdentity(): Promise<NodeIdentity> {
  const [node, from] = await Promise.all([settingString('node_name'), settingString('input_from')])
  return {node: node!, inputFrom: from === 'repository' ? 'repository' : 'file'}
}
