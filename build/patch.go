package build

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"path/filepath"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// MaxPatchBytes caps a patch file (or one decoded mail part): a patch
// bigger than this is not something to try on top of a build.
const MaxPatchBytes = 32 << 20

// Patch is one diff to apply: the output of git diff, one message of git
// format-patch, or one attachment of a mail.
type Patch struct {
	// Name says where it came from, for errors: "fix.patch",
	// "thread.mbox: message 2, attachment v3-0001-Fix.patch".
	Name string
	// Subject is the mail's subject or the commit subject of a
	// format-patch message; "" for a bare diff.
	Subject string
	Files   []*gitdiff.File
}

// ReadPatchFile reads a patch file: git diff or git format-patch output, or
// an mbox of mails whose bodies or MIME attachments (base64 and
// quoted-printable are decoded) hold patches. The patches are returned in
// the order they appear; a message without a diff (a cover letter, a
// reply) is skipped.
func ReadPatchFile(path string) ([]Patch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading patch: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPatchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading patch %s: %w", path, err)
	}
	if len(data) > MaxPatchBytes {
		return nil, fmt.Errorf("patch %s is larger than %d MiB: give a smaller patch", path, MaxPatchBytes>>20)
	}
	return ParsePatches(filepath.Base(path), data)
}

// ParsePatches parses data (see ReadPatchFile); name is used in errors.
// A diff of a path pgbisect does not write (absolute, with a ".." or .git
// element, a control character) is refused with a *RefusedError.
func ParsePatches(name string, data []byte) ([]Patch, error) {
	var out []Patch
	if isMail(data) {
		for i, msg := range splitMbox(data) {
			where := name
			if i > 0 || len(msg) < len(data) {
				where = fmt.Sprintf("%s: message %d", name, i+1)
			}
			ps, err := mailPatches(where, msg)
			if err != nil {
				return nil, err
			}
			out = append(out, ps...)
		}
	} else {
		p, err := parseDiff(name, "", data)
		if err != nil {
			return nil, err
		}
		if p != nil {
			out = append(out, *p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("patch %s holds no diff: give git diff or git format-patch output, or an mbox whose mails carry a patch", name)
	}
	return out, nil
}

// parseDiff parses one diff; nil when text holds none.
func parseDiff(name, subject string, text []byte) (*Patch, error) {
	files, preamble, err := gitdiff.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", name, err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	// Refused here already, so that a comment naming such a patch is
	// answered before it is queued; ApplyPatches checks again.
	for _, fd := range files {
		if err := checkFileNames(name, fd); err != nil {
			return nil, err
		}
	}
	if subject == "" {
		// git format-patch output: the preamble is the mail header.
		if h, err := gitdiff.ParsePatchHeader(preamble); err == nil && h.Title != "" {
			subject = h.Title
		}
	}
	return &Patch{Name: name, Subject: subject, Files: files}, nil
}

// mailHeaders are header names that mark data as a mail rather than a
// bare diff.
var mailHeaders = []string{"from:", "subject:", "date:", "message-id:", "mime-version:", "content-type:",
	"return-path:", "received:", "delivered-to:", "to:", "cc:"}

// isMail reports whether data is an mbox or a single mail: it starts with
// an mbox "From " line or with a mail header.
func isMail(data []byte) bool {
	line, _, _ := bytes.Cut(bytes.TrimLeft(data, "\r\n"), []byte("\n"))
	l := strings.ToLower(string(line))
	if strings.HasPrefix(l, "from ") {
		return true
	}
	for _, h := range mailHeaders {
		if strings.HasPrefix(l, h) {
			return true
		}
	}
	return false
}

// splitMbox splits an mbox at its "From " separator lines (at the start
// or after an empty line); a single mail is one message.
func splitMbox(data []byte) [][]byte {
	var msgs [][]byte
	start := -1
	prevEmpty := true
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += off + 1
		}
		line := data[off:end]
		if prevEmpty && bytes.HasPrefix(line, []byte("From ")) {
			if start >= 0 {
				msgs = append(msgs, data[start:off])
			}
			start = end // the separator line is not part of the message
		} else if start < 0 {
			start = off
		}
		prevEmpty = len(bytes.TrimRight(line, "\r\n")) == 0
		off = end
	}
	if start >= 0 && start < len(data) {
		msgs = append(msgs, data[start:])
	}
	return msgs
}

// mailPatches returns the patches of one mail: its body when that holds a
// diff (git format-patch, git send-email) and each MIME part that does.
func mailPatches(name string, msg []byte) ([]Patch, error) {
	m, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		// Not a parseable mail after all: try it as a diff.
		p, perr := parseDiff(name, "", msg)
		if perr != nil || p == nil {
			return nil, fmt.Errorf("patch %s: not a mail (%s) and not a diff", name, clip(err.Error()))
		}
		return []Patch{*p}, nil
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		subject = m.Header.Get("Subject")
	}
	var out []Patch
	err = walkPart(name, m.Header, m.Body, func(where string, body []byte) error {
		p, err := parseDiff(where, subject, body)
		if err != nil {
			return err
		}
		if p != nil {
			out = append(out, *p)
		}
		return nil
	})
	return out, err
}

// maxQuote bounds what an error quotes of a patch: net/mail's errors
// quote a malformed header line whole, and a patch comes from outside
// (a GitHub comment's attachment): its errors go back in the reply.
const maxQuote = 200

// clip shortens msg to maxQuote bytes, marking the cut.
func clip(msg string) string {
	if len(msg) <= maxQuote {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxQuote], "") + "..."
}

// header is the part of a MIME header walkPart reads.
type header interface{ Get(string) string }

// walkPart calls fn with the decoded body of every leaf part of a MIME
// entity, recursing into multipart ones.
func walkPart(name string, h header, body io.Reader, fn func(where string, body []byte) error) error {
	ctype := h.Get("Content-Type")
	mediaType, params, err := mime.ParseMediaType(ctype)
	if ctype == "" || err != nil {
		mediaType = "text/plain"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for i := 1; ; i++ {
			part, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("patch %s: reading MIME part %d: %w", name, i, err)
			}
			where := name
			if fn := part.FileName(); fn != "" {
				where = fmt.Sprintf("%s, attachment %s", name, fn)
			} else {
				where = fmt.Sprintf("%s, part %d", name, i)
			}
			if err := walkPart(where, part.Header, part, fn); err != nil {
				return err
			}
		}
	}
	if !strings.HasPrefix(mediaType, "text/") && !strings.HasPrefix(mediaType, "application/") {
		return nil // images, signatures of other kinds
	}
	if mediaType == "application/pgp-signature" || mediaType == "text/html" {
		return nil
	}
	var r io.Reader = body
	switch strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))) {
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, body) // skips the line breaks
	case "quoted-printable":
		r = quotedprintable.NewReader(body)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxPatchBytes+1))
	if err != nil {
		return fmt.Errorf("patch %s: decoding %s: %w", name, h.Get("Content-Transfer-Encoding"), err)
	}
	if len(data) > MaxPatchBytes {
		return fmt.Errorf("patch %s: larger than %d MiB", name, MaxPatchBytes>>20)
	}
	return fn(name, data)
}
