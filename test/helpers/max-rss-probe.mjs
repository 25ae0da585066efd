// Loaded with `node --import` in front of the CLI: when the process exits, writes its peak
// resident set size (KiB, as getrusage reports it) to $LOCALPUPPET_TEST_MAXRSS_FILE, so a
// test can hold a command to a bound in memory without /usr/bin/time.
import {writeFileSync} from 'node:fs'

const file = process.env.LOCALPUPPET_TEST_MAXRSS_FILE
if (file) process.on('exit', () => writeFileSync(file, String(process.resourceUsage().maxRSS)))
