package vault

// AccountName names a connection's provider account in one phrase, for the
// admin's pages and the notice a cut-off leaves on /account: its display
// name (Credential.DisplayName, as Connection.DisplayName keeps it) and the
// user's label in parentheses, "octocat (work)"; the label alone, "(work)",
// for an account the provider does not name (an API key); the display name
// alone without a label; "" with neither. The parentheses always mark the
// user's own name, as the account and connect pages show it beside the
// provider's.
func AccountName(displayName, label string) string {
	switch {
	case label == "":
		return displayName
	case displayName == "":
		return "(" + label + ")"
	}
	return displayName + " (" + label + ")"
}
