package provider

// scopeText is what the built-in templates say about their common scopes, by
// template: a short description in the user's terms, shown beside the scope
// token on the consent and account pages ("repo — Full control of your
// public and private repositories"). Each list follows the provider's own
// reference (named above it), shortened; a scope not listed shows as its
// token alone. A providers-file entry's scope_descriptions override or add
// to these (Spec.ScopeDescriptions).
//
// Notion has none: its integrations' capabilities are chosen in Notion,
// not requested as scopes.
var scopeText = map[string]map[string]string{
	// https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/scopes-for-oauth-apps
	"github": {
		"repo":               "Full control of your public and private repositories",
		"repo:status":        "Read and write commit statuses of your repositories",
		"repo_deployment":    "Read and write deployment statuses of your repositories",
		"public_repo":        "Read and write access to your public repositories",
		"repo:invite":        "Accept and decline invitations to collaborate on repositories",
		"security_events":    "Read and write security events (code scanning)",
		"admin:repo_hook":    "Full control of repository webhooks",
		"write:repo_hook":    "Read and write repository webhooks",
		"read:repo_hook":     "Read repository webhooks",
		"admin:org":          "Full control of your organizations and teams",
		"write:org":          "Read and write organization and team membership",
		"read:org":           "Read organization and team membership",
		"admin:public_key":   "Full control of your public SSH keys",
		"write:public_key":   "Create, list and view your public SSH keys",
		"read:public_key":    "List and view your public SSH keys",
		"gist":               "Create and edit gists",
		"notifications":      "Read your notifications and mark them as read",
		"user":               "Read and write your profile",
		"read:user":          "Read your profile",
		"user:email":         "Read your email addresses",
		"user:follow":        "Follow and unfollow users",
		"project":            "Read and write projects",
		"read:project":       "Read projects",
		"delete_repo":        "Delete repositories you administer",
		"workflow":           "Add and update GitHub Actions workflow files",
		"write:packages":     "Upload and publish packages",
		"read:packages":      "Download and install packages",
		"delete:packages":    "Delete packages",
		"codespace":          "Create and manage codespaces",
		"admin:gpg_key":      "Full control of your GPG keys",
		"read:gpg_key":       "List and view your GPG keys",
		"admin:org_hook":     "Full control of organization webhooks",
		"read:audit_log":     "Read the audit log of your enterprise or organization",
		"read:discussion":    "Read team discussions",
		"write:discussion":   "Read and write team discussions",
		"admin:enterprise":   "Full control of your enterprises",
		"manage_runners:org": "Manage the GitHub Actions runners of your organizations",
	},
	// https://docs.gitlab.com/integration/oauth_provider/#view-all-authorized-applications
	// (the scopes of an OAuth application; the same as a personal access token's).
	"gitlab": {
		"api":              "Complete read and write access to the API, including all your groups and projects",
		"read_api":         "Read access to the API, including all your groups and projects",
		"read_user":        "Read your profile, including your username and public email",
		"read_repository":  "Read (pull) your repositories",
		"write_repository": "Read and write (pull and push) your repositories",
		"read_registry":    "Read (pull) container registry images",
		"write_registry":   "Write (push) container registry images",
		"sudo":             "Perform API actions as any user (administrators)",
		"openid":           "Sign you in with GitLab",
		"profile":          "Read your name, username and avatar",
		"email":            "Read your primary email address",
	},
	// https://developers.google.com/identity/protocols/oauth2/scopes (the
	// wording of Google's own consent screen).
	"google": googleScopeText,
	// https://learn.microsoft.com/en-us/graph/permissions-reference (the
	// delegated permissions' display strings).
	"microsoft": {
		"openid":              "Sign you in",
		"profile":             "View your basic profile",
		"email":               "View your email address",
		"offline_access":      "Keep access to what you allowed while you are away",
		"User.Read":           "Sign you in and read your profile",
		"User.ReadBasic.All":  "Read the basic profiles of all users",
		"Mail.Read":           "Read your mail",
		"Mail.ReadWrite":      "Read and write your mail",
		"Mail.Send":           "Send mail as you",
		"Calendars.Read":      "Read your calendars",
		"Calendars.ReadWrite": "Full access to your calendars",
		"Contacts.Read":       "Read your contacts",
		"Contacts.ReadWrite":  "Read and write your contacts",
		"Files.Read":          "Read your files",
		"Files.ReadWrite":     "Full access to your files",
		"Files.Read.All":      "Read all files you can access",
		"Files.ReadWrite.All": "Full access to all files you can access",
		"Sites.Read.All":      "Read items in all site collections",
		"Tasks.ReadWrite":     "Create, read, update and delete your tasks and task lists",
		"Chat.Read":           "Read your chat messages",
		"Team.ReadBasic.All":  "Read the names and descriptions of your teams",
	},
	// https://docs.slack.dev/reference/scopes (user-token scopes).
	"slack": {
		"channels:read":    "View basic information about public channels in your workspace",
		"channels:history": "View messages and other content in public channels",
		"groups:read":      "View basic information about your private channels",
		"groups:history":   "View messages and other content in your private channels",
		"im:read":          "View basic information about your direct messages",
		"im:history":       "View messages and other content in your direct messages",
		"mpim:read":        "View basic information about your group direct messages",
		"mpim:history":     "View messages and other content in your group direct messages",
		"chat:write":       "Send messages on your behalf",
		"users:read":       "View people in your workspace",
		"users:read.email": "View the email addresses of people in your workspace",
		"files:read":       "View files shared in channels and conversations you are in",
		"files:write":      "Upload, edit and delete files on your behalf",
		"search:read":      "Search your workspace's content",
		"reactions:read":   "View emoji reactions and their content",
		"reactions:write":  "Add and remove emoji reactions on your behalf",
		"team:read":        "View the name, email domain and icon of your workspace",
		"identity.basic":   "View information about your identity",
	},
	// https://linear.app/developers/oauth-2-0-authentication (scopes).
	"linear": {
		"read":               "Read your Linear account: issues, projects, teams and comments",
		"write":              "Read and write everything your Linear account can",
		"issues:create":      "Create issues and their attachments",
		"comments:create":    "Create comments on issues",
		"timeSchedule:write": "Create and change time schedules",
		"admin":              "Full access to admin-level settings",
	},
	// https://developer.atlassian.com/cloud/jira/platform/scopes-for-oauth-2-3LO-and-forge-apps/
	// and https://developer.atlassian.com/cloud/confluence/scopes-for-oauth-2-3LO-and-forge-apps/
	"atlassian": atlassianScopeText,
	// https://developers.dropbox.com/oauth-guide (scopes of the App Console).
	"dropbox": {
		"account_info.read":    "View basic information about your Dropbox account",
		"files.metadata.read":  "View information about your Dropbox files and folders",
		"files.metadata.write": "View and edit information about your Dropbox files and folders",
		"files.content.read":   "View the content of your Dropbox files and folders",
		"files.content.write":  "Edit the content of your Dropbox files and folders",
		"sharing.read":         "View your Dropbox sharing settings and collaborators",
		"sharing.write":        "View and manage your Dropbox sharing settings and collaborators",
	},
}

// googleScopeText serves every Google template (google, gmail, google-drive,
// google-calendar): one grant, one consent screen wording.
var googleScopeText = map[string]string{
	"openid":  "Associate you with your personal info on Google",
	"email":   "See your primary Google Account email address",
	"profile": "See your personal info, including any you made publicly available",
	"https://www.googleapis.com/auth/userinfo.email":           "See your primary Google Account email address",
	"https://www.googleapis.com/auth/userinfo.profile":         "See your personal info, including any you made publicly available",
	"https://www.googleapis.com/auth/drive":                    "See, edit, create and delete all of your Google Drive files",
	"https://www.googleapis.com/auth/drive.file":               "See, edit, create and delete only the Google Drive files you use with this app",
	"https://www.googleapis.com/auth/drive.readonly":           "See and download all your Google Drive files",
	"https://www.googleapis.com/auth/drive.metadata.readonly":  "See information about your Google Drive files",
	"https://mail.google.com/":                                 "Read, compose, send and permanently delete all your email from Gmail",
	"https://www.googleapis.com/auth/gmail.readonly":           "View your email messages and settings",
	"https://www.googleapis.com/auth/gmail.send":               "Send email on your behalf",
	"https://www.googleapis.com/auth/gmail.compose":            "Manage drafts and send emails",
	"https://www.googleapis.com/auth/gmail.modify":             "Read, compose and send emails from your Gmail account",
	"https://www.googleapis.com/auth/gmail.labels":             "See and edit your email labels",
	"https://www.googleapis.com/auth/calendar":                 "See, edit, share and permanently delete all the calendars you can access",
	"https://www.googleapis.com/auth/calendar.readonly":        "See and download any calendar you can access",
	"https://www.googleapis.com/auth/calendar.events":          "View and edit events on all your calendars",
	"https://www.googleapis.com/auth/calendar.events.readonly": "View events on all your calendars",
	"https://www.googleapis.com/auth/spreadsheets":             "See, edit, create and delete all your Google Sheets spreadsheets",
	"https://www.googleapis.com/auth/spreadsheets.readonly":    "See all your Google Sheets spreadsheets",
	"https://www.googleapis.com/auth/documents":                "See, edit, create and delete all your Google Docs documents",
	"https://www.googleapis.com/auth/documents.readonly":       "See all your Google Docs documents",
}

// atlassianScopeText serves the atlassian, jira and confluence templates.
var atlassianScopeText = map[string]string{
	"read:me":                         "Read your Atlassian account profile",
	"offline_access":                  "Keep access to what you allowed while you are away",
	"read:jira-work":                  "Read Jira projects and issues, and search for issues",
	"write:jira-work":                 "Create and edit Jira issues, post comments and log work",
	"read:jira-user":                  "View Jira users you can see",
	"manage:jira-project":             "Create and edit Jira project settings",
	"manage:jira-configuration":       "Change Jira settings an administrator can change",
	"read:confluence-content.all":     "Read all Confluence content you can see, including page bodies",
	"read:confluence-content.summary": "Read a summary of Confluence pages and blog posts",
	"read:confluence-space.summary":   "Read a summary of Confluence spaces",
	"write:confluence-content":        "Create and edit Confluence pages, blog posts and comments",
	"search:confluence":               "Search Confluence content and space summaries",
}

// scopeTextOf is the built-in descriptions for template name: the family's
// (every Google template shares Google's, every Atlassian one Atlassian's).
func scopeTextOf(template string) map[string]string {
	switch template {
	case "gmail", "google-drive", "google-calendar":
		template = "google"
	case "jira", "confluence":
		template = "atlassian"
	}
	return scopeText[template]
}
