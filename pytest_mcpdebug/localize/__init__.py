"""The dynamic localizer's test-process side (`localize` tool, `mcpdebug localize`): small changes of the
top suspect lines run against the failing tests, in memory, within a time budget. Imported only by the
localizer's own pytest run (`runner`)."""
