/* Tandem SDK — ABI and SDK version numbers.
 *
 * The ABI has two levels (sdk/ABI.md rules 1-3):
 *   - TDM_ABI_MAJOR must match exactly between host and plugin;
 *   - TDM_ABI_MINOR only appends fields and functions; each side uses
 *     min(host minor, plugin minor).
 * TDM_SDK_VERSION is the release of these headers (semantic version).
 * Every bump gets an entry in sdk/CHANGELOG.md. sdk/ABI.md, the rules these
 * headers cite, is installed with them (/usr/share/doc/tandem-dev/ABI.md).
 */
#ifndef TANDEM_VERSION_H
#define TANDEM_VERSION_H

#define TDM_ABI_MAJOR 1
#define TDM_ABI_MINOR 17

#define TDM_SDK_VERSION_MAJOR 1
#define TDM_SDK_VERSION_MINOR 18
#define TDM_SDK_VERSION_PATCH 0
#define TDM_SDK_VERSION "1.18.0"

#endif /* TANDEM_VERSION_H */
