package pgsrc

import "time"

// lockPoll is how often a waiting process retries a held file lock.
const lockPoll = 200 * time.Millisecond
