import {dirname, join, relative} from 'node:path'

import type {TreeFile} from '../tree/release-tree.js'

export interface PreinstParams {
  package: string
  release: string
  digest: string
  /** Absolute paths on the node. */
  moduleDir: string
  releaseDir: string
  recordFile: string
  files: TreeFile[]
  /** Empty directories the release keeps. */
  dirs: string[]
}

/**
 * The package's preinst: dpkg replaces files no package owns without a word, so a tag
 * that `localpuppet install` or `fetch` put there first would silently get a second
 * owner. Before unpacking, this checks the tag and its install record:
 *
 * - below the module directory, a link where dpkg would write (\`<app>\`, \`<app>/tags\`, the
 *   tag, its record's directories, anything in the tag), or any of those (or the module
 *   directory) owned by another user than root or writable by group or others: refused,
 *   on install and upgrade alike (dpkg follows links to directories: root's files would
 *   land where that user chose);
 * - a directory leading to the module directory (walked as the kernel walks it, through
 *   links) owned by another user or writable by group or others, unless a root-owned sticky
 *   one such as /tmp: refused likewise (its owner could swap the module directory for a
 *   link, after the check too);
 * - nothing there: install;
 * - a record with another digest: refused (tags are immutable), on install and reinstall;
 * - on a first install, a directory without a record, or whose files differ from this
 *   package's (sha256, count, executable bits, empty directories): refused, naming
 *   `localpuppet verify`;
 * - the same content, untouched: dpkg takes the files over; the record becomes the package's.
 *
 * It only reads, so it is safe to run any number of times, and it never runs puppet.
 */
export function preinstScript(params: PreinstParams): string {
  const executables = params.files.filter((file) => file.executable).length
  const sums = params.files.map((file) => sumLine(file)).join('\n')
  return `#!/bin/sh
# ${params.package} preinst, written by localpuppet pack --format deb: one owner per tag.
# Reads only; safe to run again; never runs puppet.
set -e
release=${quote(params.release)}
dir=${quote(params.releaseDir)}
record=${quote(params.recordFile)}
digest=${quote(params.digest)}

refuse() {
  echo "${params.package}: $release: $*" >&2
  exit 1
}

case "$1" in
  install|upgrade) ;;
  *) exit 0 ;;
esac

# Where dpkg writes must be root's alone, by localpuppet's own rule (root trusts only what
# root owns): dpkg follows a link to a directory, so a link below the module directory, or a
# directory there another user owns or can write (they can put a link in it), lets them
# choose where root's files land, or change them afterwards.
me=$(id -u)

# The directories leading to the module directory, walked as the kernel (and so dpkg) walks
# them, a link's target included: each must be root's and writable by nobody else (a
# root-owned sticky one such as /tmp is fine), as localpuppet's trust rule says. Whoever owns
# one could otherwise swap what follows it, the module directory too, for a link, after this
# check as well as before it.
on_the_way() {
  owner=$(stat -c %u -- "$1")
  [ "$owner" = 0 ] || [ "$owner" = "$me" ] || refuse "$1 (on the way to the module directory) is owned by uid $owner, not root: they can swap the module directory for a link; check it, then: chown root $1"
  [ -k "$1" ] || [ -z "$(find "$1" -maxdepth 0 -perm /022)" ] || refuse "$1 (on the way to the module directory) is writable by group or others: they can swap the module directory for a link; check it, then: chmod go-w $1"
}
at=/
rest=${quote(params.moduleDir)}
links=0
on_the_way /
while [ -n "$rest" ]; do
  name=\${rest%%/*}
  if [ "$name" = "$rest" ]; then rest=; else rest=\${rest#*/}; fi
  case $name in
    ''|.) continue ;;
    ..) at=$(dirname -- "$at"); continue ;;
  esac
  next=\${at%/}/$name
  if [ -L "$next" ]; then
    # In a sticky directory others can write (the only place another user's link can be), a link must be root's.
    if [ -k "$at" ] && [ -n "$(find "$at" -maxdepth 0 -perm /022)" ]; then
      owner=$(stat -c %u -- "$next")
      [ "$owner" = 0 ] || [ "$owner" = "$me" ] || refuse "$next (on the way to the module directory) is a link owned by uid $owner, not root: they can point it elsewhere"
    fi
    links=$((links + 1))
    [ "$links" -le 40 ] || refuse "$next: too many levels of links on the way to the module directory"
    target=$(readlink -- "$next")
    case $target in /*) at=/ ;; esac
    rest=$target\${rest:+/$rest}
    continue
  fi
  # Not there yet: dpkg makes it in $at, judged already.
  [ -d "$next" ] || break
  on_the_way "$next"
  at=$next
done

for path in ${[params.moduleDir, ...belowModuleDir(params)].map((path) => quote(path)).join(' ')}; do
  if [ "$path" != ${quote(params.moduleDir)} ] && [ -L "$path" ]; then
    refuse "$path is a symbolic link: dpkg would write where it leads; remove it (a tag is a directory)"
  fi
  [ -e "$path" ] || continue
  owner=$(stat -L -c %u -- "$path")
  [ "$owner" = 0 ] || [ "$owner" = "$me" ] || refuse "$path is owned by uid $owner, not root; check what it holds, then: chown -R root $path"
  [ -z "$(find -L "$path" -maxdepth 0 -perm /022)" ] || refuse "$path is writable by group or others; check what it holds, then: chmod go-w $path"
done
if [ -d "$dir" ]; then
  found=$(find "$dir" -mindepth 1 \\( -type l -o -perm /022 -o \\( ! -uid 0 ! -uid "$me" \\) \\) -print -quit)
  [ -z "$found" ] || refuse "$found is a link, or owned or writable by another user; check what the tag holds: localpuppet verify $release"
fi

if [ -e "$record" ]; then
  current=$(sed -n 's/.*"digest":"\\(sha256:[0-9a-f]*\\)".*/\\1/p' "$record" | head -n 1)
  [ "$current" = "$digest" ] || refuse "already installed with other content ($current; this package has $digest); tags are immutable: publish the change as a new tag"
elif [ "$1" = install ] && { [ -e "$dir" ] || [ -L "$dir" ]; }; then
  refuse "$dir exists without a localpuppet install record; remove it, or keep it and do not install this package"
fi

# The same digest, not yet this package's: take it over only if it is still exactly that.
if [ "$1" = install ] && [ -e "$dir" ]; then
  hint="localpuppet verify $release lists the changes; remove $dir and its record to install this package"
  [ -d "$dir" ] && [ ! -L "$dir" ] || refuse "$dir is not a directory"
  cd "$dir"
  [ "$(find . ! -type d | wc -l)" -eq ${params.files.length} ] || refuse "was modified after it was installed (files added or removed); $hint"
  [ "$(find . -type f -perm /111 | wc -l)" -eq ${executables} ] || refuse "was modified after it was installed (executable bits); $hint"
  [ "$(find . -mindepth 1 -type d -empty | wc -l)" -eq ${params.dirs.length} ] || refuse "was modified after it was installed (empty directories); $hint"
${params.dirs.length === 0 ? '' : `  for empty in ${params.dirs.map((dir) => quote(dir)).join(' ')}; do
    [ -d "$empty" ] || refuse "was modified after it was installed (empty directory $empty); $hint"
  done
`}${params.files.length === 0 ? '' : `  sha256sum --check --quiet --strict >/dev/null 2>&1 <<'LOCALPUPPET_SHA256SUMS' || refuse "was modified after it was installed; $hint"
${sums}
LOCALPUPPET_SHA256SUMS
`}fi

exit 0
`
}

/**
 * What dpkg writes into below the module directory, top down: \`<app>\`, \`<app>/tags\`, the
 * tag, and the directories of its install record (\`.localpuppet/records/<app>/tags\`).
 */
function belowModuleDir(params: PreinstParams): string[] {
  const steps = (to: string) => {
    const parts = relative(params.moduleDir, to).split('/')
    return parts.map((_, i) => join(params.moduleDir, ...parts.slice(0, i + 1)))
  }

  return [...new Set([...steps(params.releaseDir), ...steps(dirname(params.recordFile))])]
}

/** A line of \`sha256sum\` output; a name with a backslash is escaped as sha256sum does. */
function sumLine(file: TreeFile): string {
  if (!file.path.includes('\\')) return `${file.sha256}  ${file.path}`
  return `\\${file.sha256}  ${file.path.replaceAll('\\', '\\\\')}`
}

/** Single-quoted for sh. */
export function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`
}
