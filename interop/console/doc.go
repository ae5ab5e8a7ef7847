// Package console drives the admin console in headless Chromium: the
// operator's path through the pages, against a relay and an inbox consumer
// running in-process. It is a separate module so the main module does not
// depend on chromedp.
package console
