#include "app.hpp"

int main(int argc, char** argv) { return evodispatch::cli::run(argc, argv); }
