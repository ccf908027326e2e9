package cli

import (
	"fmt"
	"io"

	"github.com/pgbisect/pgbisect/bench/profile"
)

// compareProfilePrint writes the "where the time went" table of a point.
func compareProfilePrint(w io.Writer, point string, s *profile.Summary) {
	if point != "" {
		fmt.Fprintf(w, "\npoint %s, B against A. ", point)
	} else {
		fmt.Fprint(w, "\nB against A. ")
	}
	s.WriteTable(w)
}
