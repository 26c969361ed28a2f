#include "cli/empty_values.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>

namespace keywatch::cli {
namespace {

std::string empty_value_error(const std::string &option) {
    return option + ": the value is empty: give a value, or leave the option out";
}

}  // namespace

bool check_empty_assignments(int argc, char **argv, std::string *err) {
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--") return true;
        if (arg.size() > 3 && arg.compare(0, 2, "--") == 0 && arg.find('=') == arg.size() - 1) {
            *err = empty_value_error(arg.substr(0, arg.size() - 1)) + " (" + arg + ")";
            return false;
        }
    }
    return true;
}

bool check_empty_values(const CLI::App &app, std::string *err) {
    for (const CLI::Option *opt : app.get_options()) {
        if (!opt->nonpositional() || opt->count() == 0) continue;
        for (const std::string &value : opt->results()) {
            if (!value.empty()) continue;
            *err = empty_value_error(opt->get_name());
            return false;
        }
    }
    for (const CLI::App *sub : app.get_subcommands())
        if (!check_empty_values(*sub, err)) return false;
    return true;
}

std::string empty_env_note(const char *name) {
    const char *value = std::getenv(name);
    if (!value || *value) return "";
    return std::string(name) + " is set but empty: it counts as unset";
}

}  // namespace keywatch::cli
