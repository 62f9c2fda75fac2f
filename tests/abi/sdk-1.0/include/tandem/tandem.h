/* Tandem SDK — umbrella header: everything a plugin needs, C99, standard
 * headers only. C++ authors may prefer tandem/tandem.hpp. */
#ifndef TANDEM_TANDEM_H
#define TANDEM_TANDEM_H

#include "tandem/backend.h"
#include "tandem/comm.h"
#include "tandem/feature.h"
#include "tandem/graph.h"
#include "tandem/host_api.h"
#include "tandem/plugin.h"
#include "tandem/types.h"
#include "tandem/version.h"

#endif /* TANDEM_TANDEM_H */
