import {Args} from '@oclif/core'

import {BaseCommand, describeWithExitCodes} from '../cli/base-command.js'
import {moduleDirFlags} from '../cli/flags.js'
import type {ReleaseClasses} from '../lib/catalog/release-classes.js'
import {terminalText} from '../lib/util/terminal-text.js'

export default class Classes extends BaseCommand {
  static override summary = "List the classes and defined types a release's modulepath provides, with their parameters."
  static override description = describeWithExitCodes(
    'What a UI or a person assigning classes to a node needs: each class and defined type, its parameters (type, and ' +
      "where a value comes from when the input gives none: the module's own Hiera data, the default in the code, or " +
      'nothing: required) and the file it comes from. Definitions Puppet cannot load by name (a class in a file where ' +
      'its autoloader does not look, a module directory whose name is not a valid module name) are listed, marked ' +
      'not loadable, with the reason.',
    [
      {code: 0, meaning: 'listed'},
      {code: 65, meaning: 'invalid reference or release'},
      {code: 66, meaning: 'release or module dir not found'},
    ],
  )

  static override examples = ['<%= config.bin %> classes foo/tags/1.4.0', '<%= config.bin %> classes foo@^1.4 --json']
  static override args = {ref: Args.string({description: 'the release: foo/tags/1.4.0, foo/trunk, foo@^1.4', required: true})}
  static override flags = moduleDirFlags

  async run(): Promise<ReleaseClasses> {
    const {args, flags} = await this.parse(Classes)
    const {releaseClasses} = await import('../lib/catalog/release-classes.js')
    const result = await releaseClasses(flags['module-dir'], args.ref)
    for (const definition of result.definitions) {
      const notLoadable = definition.notLoadable === null ? '' : `  (not loadable: ${definition.notLoadable})`
      // A module's code and data: a default may hold any character.
      this.log(terminalText(`${definition.kind === 'define' ? 'define' : 'class '} ${definition.name}  ${definition.release}/${definition.file}:${definition.line}${notLoadable}`))
      for (const param of definition.parameters) {
        const maybe = param.nodeDependent.length > 0 ? `; module data may set it on some nodes: ${param.nodeDependent.join(', ')}` : ''
        const value =
          param.source === 'module data'
            ? ` = ${param.data!.value === null ? 'undef' : JSON.stringify(param.data!.value)}  (module data ${param.data!.file}${param.data!.line ? `:${param.data!.line}` : ''}${maybe})`
            : param.source === 'code'
              ? ` = ${param.default}${maybe ? `  (code${maybe})` : ''}`
              : `  (required${maybe})`
        this.log(`    ${terminalText(`${param.type ? `${param.type} ` : ''}$${param.name}${value}`)}`)
      }
    }

    if (result.definitions.length === 0) this.log(`no classes on the modulepath of ${result.release}`)
    return result
  }
}
