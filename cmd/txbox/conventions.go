package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version describes this build from its build info: the module version
// (a tag, or "(devel)" for a build from a work tree), the VCS commit and
// whether the tree was modified, and the Go version. A build without VCS
// information (-buildvcs=false, a tree without .git, go install of a tag)
// says so, or shows the module version alone when it has one.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "txbox (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		case "vcs.time":
			at = " " + s.Value
		}
	}
	switch {
	case rev != "":
		return fmt.Sprintf("txbox %s commit %s%s%s %s", v, rev, modified, at, bi.GoVersion)
	case v != "(devel)":
		return fmt.Sprintf("txbox %s %s", v, bi.GoVersion)
	}
	return fmt.Sprintf("txbox (devel) (built without VCS information) %s", bi.GoVersion)
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), version())
			return nil
		},
	}
}

// conventions makes every command of root behave the same way: a mistyped
// command or flag is a usage error (exit 2) with a suggestion, a command
// group run without a subcommand prints its help, every flag's help names
// its environment variable, and every help ends with the exit codes.
func conventions(root *cobra.Command) {
	root.Version = version()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetUsageTemplate(root.UsageTemplate() + exitHelp + "\n")
	root.SetFlagErrorFunc(flagError)
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.SuggestionsMinimumDistance = 2
		if c.Name() == "demo" || c.Name() == "version" {
			ownFlagsOnly(c)
		}
		if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
			c.Args = unknownSubcommand
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if seen[fl] || fl.Name == "help" || fl.Name == "version" {
				return
			}
			seen[fl] = true
			// pflag shows the first `quoted` text of a usage as the flag's
			// value name ("--mode txbox migrate --cdc"): a command quoted
			// in prose keeps plain quotes.
			fl.Usage = strings.ReplaceAll(fl.Usage, "`", "'")
			if flagOnly[fl.Name] {
				fl.Usage += " [command line only: no environment variable]"
				return
			}
			fl.Usage += " [" + envName(fl.Name) + "]"
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand rejects an argument given to a command group: it can
// only be a mistyped subcommand.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return &usageError{msg: msg + "; run '" + cmd.CommandPath() + " --help' for the commands"}
}

// flagError turns pflag's parse errors into usage errors, with a
// suggestion for a mistyped flag name.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := closestFlag(cmd, name); s != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", s)
		}
	}
	return &usageError{msg: msg + "; run '" + cmd.CommandPath() + " --help' for the flags"}
}

func closestFlag(cmd *cobra.Command, name string) string {
	best, bestD := "", 3 // at most 2 edits away
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if d := editDistance(name, fl.Name); d < bestD {
			best, bestD = fl.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ownFlagsOnly keeps the shared database and log flags out of the help of
// a command that uses none of them (demo brings its own databases).
func ownFlagsOnly(c *cobra.Command) {
	c.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		cmd.InheritedFlags().VisitAll(func(fl *pflag.Flag) { fl.Hidden = true })
		cmd.Parent().HelpFunc()(cmd, args)
	})
}
