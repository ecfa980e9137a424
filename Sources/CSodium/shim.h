#ifndef COFFER_CSODIUM_SHIM_H
#define COFFER_CSODIUM_SHIM_H
#include <sodium.h>
#endif
