import {CommandHelp, Help} from '@oclif/core'

/** The line that starts the exit-code table describeWithExitCodes appends to a description. */
const EXIT_CODES = '\n\nEXIT CODES\n'

/**
 * oclif's command help, but the exit-code table keeps its columns at any width: oclif
 * wraps a description as prose and trims each line, so a long meaning continued under
 * the code column. Each meaning is wrapped on its own, continuation lines indented under it.
 */
class LocalpuppetCommandHelp extends CommandHelp {
  protected override description(): string | undefined {
    const description = this.command.description ?? ''
    const at = description.indexOf(EXIT_CODES)
    if (at === -1) return super.description()
    const prose = this.wrap([...(this.command.summary ? [this.command.summary, ''] : []), description.slice(0, at)].join('\n'))
    const rows = description.slice(at + EXIT_CODES.length).split('\n')
    const width = Math.max(...rows.map((row) => /\S+/.exec(row)?.[0].length ?? 0))
    const table = rows.map((row) => {
      const [, code, meaning] = /^\s*(\S+)\s+(.*)$/.exec(row) ?? [row, row, '']
      // The section is indented by indentSpacing; the meaning starts after the code column and two spaces.
      const hang = width + 2
      const lines = this.wrap(meaning, this.indentSpacing + hang).split('\n')
      return [`${code.padEnd(width)}  ${lines[0]}`, ...lines.slice(1).map((line) => `${' '.repeat(hang)}${line}`)].join('\n')
    })
    return `${prose}${EXIT_CODES}${table.join('\n')}`
  }
}

/** localpuppet's help (package.json oclif.helpClass): oclif's own, with LocalpuppetCommandHelp. */
export class LocalpuppetHelp extends Help {
  override CommandHelpClass = LocalpuppetCommandHelp
}
