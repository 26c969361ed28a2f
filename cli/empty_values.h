// One rule for empty values on the command line: an option given an empty value
// (--ttl '', --ttl=, --redis '', --duration '') is bad input, never "use the default"; an
// environment variable that is set but empty (KEYWATCH_REDIS_URL=) counts as unset.
// Not thread-safe: the main thread parses the command line.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace keywatch::cli {

// Before parsing: an argument "--name=" with nothing after the '=' (the parser would take the
// next argument as its value). False with *err naming the option. Stops at "--".
bool check_empty_assignments(int argc, char **argv, std::string *err);

// After parsing: an option of app or of a subcommand that was parsed, given an empty value.
// False with *err naming the option.
bool check_empty_values(const CLI::App &app, std::string *err);

// The note for a variable that is set but empty ("" when it is unset or has a value).
std::string empty_env_note(const char *name);

}  // namespace keywatch::cli
