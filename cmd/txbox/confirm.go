package main

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/txbox/txbox/store"
)

// confirmFlags guard a destructive command: --dry-run prints what would
// change and changes nothing; an action on more than one row asks on a
// terminal and needs --yes anywhere else (a script, a pipe, cron).
type confirmFlags struct {
	dryRun, yes bool
}

func (c *confirmFlags) add(f *pflag.FlagSet) {
	f.BoolVar(&c.dryRun, "dry-run", false, "print what would change (exact counts) and change nothing")
	f.BoolVar(&c.yes, "yes", false, "do not ask for confirmation (required when stdin is not a terminal and more than one row would change)")
}

// counts reports whether proceed needs the exact count: not with --yes
// alone, so a script's cleanup does not scan what it is about to delete.
func (c *confirmFlags) counts() bool { return c.dryRun || !c.yes }

// proceed reports whether the action described by what ("purge 12 dead
// event(s)") on n rows is to go ahead. A dry run prints "would ..." and
// stops; a refusal at the prompt is exit 1 with nothing changed.
func (c *confirmFlags) proceed(cmd *cobra.Command, what string, n int64) (bool, error) {
	w := cmd.OutOrStdout()
	if c.dryRun {
		fmt.Fprintf(w, "dry run: would %s\n", what)
		return false, nil
	}
	if c.yes || (n >= 0 && n <= 1) {
		return true, nil
	}
	if !stdinIsTerminal() {
		return false, &usageError{msg: fmt.Sprintf("would %s: give --yes to confirm, or --dry-run to only look (stdin is not a terminal, so there is no one to ask)", what)}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s? [y/N] ", upperFirst(what))
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, &runtimeError{msg: "not confirmed: nothing changed"}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// countRows counts the rows f matches; -1 when the store cannot count
// (a store from outside this module), which the prompt treats as many.
func countRows(ctx context.Context, s store.Store, f store.Filter) (int64, error) {
	return s.Count(ctx, f)
}

func countText(n int64) string {
	if n < 0 {
		return "an unknown number of"
	}
	return strconv.FormatInt(n, 10)
}
