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
	return VerifyFileWithHead(ctx, path, trusted, nil, out)
}

// VerifyFileWithHead is VerifyFile that also compares the decision log (the
// file, or a bundle's decisions.json) with the program's published log
// head (`accord verify FILE --keys KEYS --head HEAD`): a log behind it fails
// with an error wrapping ErrLogBehind. head nil skips the comparison.
func VerifyFileWithHead(ctx context.Context, path string, trusted *KeySet, head *LogHead, out io.Writer) error {
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
	if head != nil && trusted == nil {
		return fmt.Errorf("verify: %s: comparing with a published head needs trusted keys (--keys)", path)
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
		if head != nil {
			if report.Decisions == nil {
				return fmt.Errorf("verify: %s: the bundle has no decision log to compare with the head", path)
			}
			if err := writeFreshness(out, report.Decisions, head, trusted); err != nil {
				return fmt.Errorf("verify: %s: %s: %w", path, FileDecisions, err)
			}
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
	if _, err := fmt.Fprintf(out, "Decision log %q: %d records, head %s at seq %d, checkpoint %s signed by %s (%d earlier checkpoints)\n",
		report.Chain, report.Records, report.Head, report.Seq, stamp(report.CheckpointTime), report.CheckpointKeyID, report.EarlierCheckpoints); err != nil {
		return err
	}
	for _, w := range report.Warnings {
		if _, err := fmt.Fprintf(out, "WARNING: %s\n", w); err != nil {
			return err
		}
	}
	if head != nil {
		if err := writeFreshness(out, report, head, trusted); err != nil {
			return fmt.Errorf("verify: %s: %w", path, err)
		}
	}
	_, err = fmt.Fprintf(out, "OK: %s verified\n", path)
	return err
}

// writeFreshness compares a verified log with the published head and says
// how it stands.
func writeFreshness(out io.Writer, log *ChainReport, head *LogHead, trusted *KeySet) error {
	f, err := log.CompareHead(head, trusted)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Decision log %s\n", f)
	return err
}
