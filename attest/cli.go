package attest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
)

// VerifyFile checks a report bundle (.tar.gz) or an exported decision log
// (JSON) at path and writes what it verified to out: what `accord verify
// FILE [--keys KEYS]` runs. trusted nil means the file's own keys (bundles
// only; the report then warns that this shows integrity, not origin).
func VerifyFile(ctx context.Context, path string, trusted *KeySet, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic, err := br.Peek(2)
	if err != nil {
		return fmt.Errorf("verify: %s: %w", path, err)
	}
	if magic[0] == 0x1f && magic[1] == 0x8b {
		report, err := VerifyBundle(ctx, br, trusted)
		if report != nil {
			if werr := report.WriteText(out); werr != nil {
				return werr
			}
		}
		if err != nil {
			return fmt.Errorf("verify: %s: %w", path, err)
		}
		_, err = fmt.Fprintf(out, "OK: %s verified\n", path)
		return err
	}
	if trusted == nil {
		return fmt.Errorf("verify: %s: a decision log needs trusted keys (--keys keys.json, allowed_signers or PEM)", path)
	}
	data, err := io.ReadAll(io.LimitReader(br, maxMetadataFile+1))
	if err != nil {
		return fmt.Errorf("verify: %s: %w", path, err)
	}
	log, err := ParseDecisionLog(data)
	if err != nil {
		return fmt.Errorf("verify: %s: %w", path, err)
	}
	report, err := log.Verify(trusted)
	if err != nil {
		return fmt.Errorf("verify: %s: %w", path, err)
	}
	_, err = fmt.Fprintf(out, "Decision log %q: %d records, head %s at seq %d, checkpoint %s signed by %s\nOK: %s verified\n",
		report.Chain, report.Records, report.Head, report.Seq, report.CheckpointTime.UTC().Format("2006-01-02T15:04:05Z"), report.CheckpointKeyID, path)
	return err
}
