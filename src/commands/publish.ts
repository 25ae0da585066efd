import {Args, Flags} from '@oclif/core'

import {expiryWarning} from '../lib/repository/index-expiry.js'
import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {settingFlag} from '../cli/flags.js'
import type {PublishResult} from '../lib/repository/publish.js'
import {terminalText} from '../lib/util/terminal-text.js'
import {indexUpdateLine} from '../cli/render/index-update-text.js'

export default class Publish extends BaseCommand {
  static override summary = 'Add archives made by pack to a release repository: a directory any web server can serve.'
  static override description = describeWithExitCodes(
    'Verifies each archive in full, copies it under archives/<app>/ and then replaces index.json atomically (temp file, ' +
      'fsync, rename), so a reader never sees an index naming an archive that is not there. Publishers of one repository ' +
      'take turns (a lock), so none loses another\'s tags. A tag already published with the same content is left as it ' +
      'is, unless the repository\'s copy of its archive is missing or changed: then it is written again (repaired), as is a ' +
      'node input published again whose stored copy is; with other content nothing changes (tags are immutable). --sign writes index.json.sig (Ed25519, the same keys ' +
      'as pack --sign). Every publish gives the index the next version and a new expiry (--expires, default 30d), which ' +
      'nodes check to refuse a replayed or stale index; with no archive, publish only does that (a re-signing). ' +
      '--node NAME --input FILE (or --inputs DIR of NAME.yaml) publishes node inputs; the index lists each with its sha256, so ' +
      'its signature covers them. A node whose configuration says input_from: repository takes its own with apply --fetch. ' +
      'Each input is first validated as validate does, against the release its app resolves to in this repository (a tag ' +
      'it lists or this publish adds, a range\'s newest match, a channel\'s tag): classes, class parameters (did you mean), ' +
      'required parameters, the release\'s language mode, undefined variables and syntax (with --puppet); one refused input ' +
      'publishes nothing. --prune removes the inputs of nodes not in --inputs DIR (a prune of every node is refused). ' +
      'A node with a NAME.pub beside its input (its recipient, from localpuppet node-key) has its input stored encrypted to it ' +
      'with age (plus any --recipient), encrypted afresh at every publish.',
    [
      {code: 0, meaning: 'published, or already published with the same content (a stored copy that was missing or changed written again)'},
      {code: 64, meaning: 'usage error; the signing key is not Ed25519; a signed repository without --sign; no archive and no index to re-sign; --prune would remove every node\'s input'},
      {code: 65, meaning: 'an archive is corrupt, unsafe or mutable; a node input is invalid, not UTF-8 or refused by validation (one line per problem); an entry of --inputs DIR is a link, FIFO or device; a layer of --layers DIR is invalid, a link, or includes an unknown layer or itself; the repository\'s index is invalid, or its archive of an input\'s release is not what it lists; a NAME.pub or --recipient that is no age recipient; a node input without a recipient to a repository with encrypted ones, or with --recipient (--allow-plain-input); an input marking !secret without a recipient'},
      {code: 66, meaning: 'an archive, input or key not found; a node input names a tag, range or channel, or a layer, the repository does not have, or whose archive is missing from it'},
      {code: 69, meaning: 'node inputs given and puppet cannot be run for their syntax and variable checks (--puppet none skips those)'},
      {code: 73, meaning: "a tag is already published with other content; its stored archive is missing or changed and the archive given is another copy (not the bytes the index lists); another publisher held the lock too long"},
    ],
  )

  static override strict = false
  static override usage = '<%= command.id %> [ARCHIVE...] --repo DIR [--sign KEY.pem] [--expires DURATION] [--node NAME --input FILE | --inputs DIR [--prune]] [--layers DIR [--computed]] [--recipient AGE1... | --recipients-file FILE] [--allow-plain-input] [--node-documents-only] [--puppet PATH|none] [--json]'
  static override examples = [
    '<%= config.bin %> publish foo-1.5.0.tar.gz --repo /srv/www/puppet',
    '<%= config.bin %> publish dist/*.tar.gz --repo /srv/www/puppet --sign release-key.pem --json',
    '<%= config.bin %> publish --repo /srv/www/puppet --sign release-key.pem --expires 7d',
    '<%= config.bin %> publish --node web1.example.com --input web1.yaml --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> publish foo-1.6.0.tar.gz --inputs nodes/ --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> publish --layers layers/ --inputs nodes/ --repo /srv/www/puppet --sign release-key.pem',
    '<%= config.bin %> publish --inputs nodes/ --prune --repo /srv/www/puppet --sign release-key.pem --json',
  ]

  static override args = {archive: Args.string({description: 'archives made by localpuppet pack (several may be given; none: re-sign the index)', required: false})}
  static override flags = {
    repo: Flags.string({description: 'the repository directory (created when missing)', required: true, helpValue: 'DIR'}),
    sign: Flags.string({description: 'sign index.json with this Ed25519 private key (PEM)', helpValue: 'KEY.pem'}),
    expires: Flags.string({description: 'how long nodes believe the new index (90m, 12h, 7d, 4w); re-publish before then; default 30d', helpValue: 'DURATION'}),
    node: Flags.string({description: "publish this node's input (with --input)", helpValue: 'NAME', dependsOn: ['input']}),
    input: Flags.string({description: "the node's input.yaml (with --node)", helpValue: 'FILE', dependsOn: ['node']}),
    inputs: Flags.string({description: 'publish every NAME.yaml in DIR as node NAME\'s input (regular files only: a link, FIFO or device is refused)', helpValue: 'DIR', exclusive: ['node']}),
    layers: Flags.string({description: 'publish every layer in DIR (site/dc1.yaml is layer site/dc1), each with its sha256 in the index, for the inputs that name them', helpValue: 'DIR'}),
    recipient: Flags.string({description: 'also encrypt every encrypted node input to this age recipient (an operator: audit, break-glass); repeatable', helpValue: 'AGE1...', multiple: true}),
    'recipients-file': Flags.string({description: 'also encrypt every encrypted node input to the age recipients in FILE (one a line); repeatable', helpValue: 'FILE', multiple: true}),
    'allow-plain-input': Flags.boolean({description: 'publish a node input that has no recipient (NAME.pub) in plain text, to a repository that has encrypted ones'}),
    prune: Flags.boolean({description: 'with --inputs: remove the inputs of nodes not in DIR from the index and the repository (not every node\'s: refused)', dependsOn: ['inputs']}),
    puppet: settingFlag('puppet', {description: "the puppet executable for the inputs' syntax and variable checks; none skips those two", helpValue: 'PATH', defaultHelp: 'puppet on PATH, else /opt/puppetlabs/bin/puppet'}),
    'node-documents-only': Flags.boolean({description: "from now on index.json lists no node inputs: each node reads its entry in its own signed document (nodes/), and publishing one node's input writes that input and document only; a node older than documents then finds no input (66). Kept by later publishes"}),
    computed: Flags.boolean({description: "publish each node's input with its layers (--layers DIR, else layers/ beside it) merged in, so a node receives only its own document; no layer is published"}),
  }

  async run(): Promise<PublishResult> {
    const {argv, flags} = await this.parse(Publish)
    const [{publishArchives}, {parseDuration}, {nodeInputsIn}, {operatorRecipients}] = await Promise.all([
      import('../lib/repository/publish.js'),
      import('../lib/util/duration.js'),
      import('../lib/repository/publish-inputs.js'),
      import('../lib/secrets/recipients.js'),
    ])
    const expiresInMs = flags.expires === undefined ? undefined : parseDuration(flags.expires, '--expires')
    const nodes = flags.inputs ? await nodeInputsIn(flags.inputs) : flags.node && flags.input ? [{node: flags.node, file: flags.input}] : []
    const seal = {operators: await operatorRecipients(flags.recipient ?? [], flags['recipients-file'] ?? []), allowPlain: flags['allow-plain-input']}
    const puppet = nodes.length === 0 ? null : await (await import('../cli/checking-puppet.js')).checkingPuppet(flags.puppet)
    const result = await publishArchives({
      repo: flags.repo,
      archives: argv as string[],
      nodes,
      signingKey: flags.sign,
      expiresInMs,
      seal,
      ...(flags.layers ? {layers: flags.layers} : {}),
      computed: flags.computed,
      puppet,
      prune: flags.prune,
      pruneFrom: flags.inputs,
      nodeDocumentsOnly: flags['node-documents-only'],
    }).catch((error: unknown) => {
      // Every refused input's problem, one line each, before the refusal's own line.
      if (!this.jsonEnabled()) for (const problem of (error as {problems?: Array<{message: string}>}).problems ?? []) this.note(problem.message)
      throw error
    })
    if (!this.jsonEnabled()) {
      const releaseLine = (r: PublishResult['releases'][number]) =>
        r.status === 'added'
          ? `published ${r.release} as ${r.archive}`
          : r.status === 'repaired'
            ? `repaired ${r.release}: the repository's ${r.archive} was missing or not what the index lists; written again from this archive`
            : `unchanged ${r.release} (already published with the same content)`
      const inputLine = (n: PublishResult['nodes'][number]) =>
        n.status === 'repaired'
          ? `repaired input of node ${n.node} (app ${n.app}): the repository's ${n.input} was missing or not what the index lists; written again`
          : `${n.status === 'unchanged' ? 'unchanged' : n.status === 'added' ? 'published' : 'updated'} input of node ${n.node} (app ${n.app})${n.encrypted ? ', encrypted' : ''}`
      for (const r of result.releases) this.log(terminalText(releaseLine(r)))
      for (const l of result.layers) this.log(terminalText(`${l.status === 'added' ? 'published' : l.status} layer ${l.layer}`))
      for (const n of result.nodes) this.log(terminalText(inputLine(n)))
      for (const node of result.pruned) this.log(terminalText(`pruned input of node ${node} (not in ${flags.inputs})`))
      this.log(indexUpdateLine(result))
    }

    this.warnLines([expiryWarning(`index version ${result.version} of ${flags.repo}`, result.expires, Date.now())].filter((line) => line !== null))
    return result
  }
}
